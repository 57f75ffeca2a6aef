"""The batch and streaming writers of the ``strata`` sink (``df.write.format("strata")``).

Columns, as Spark's Kafka sink: ``value`` (required, binary or string), ``key`` (binary or
string), ``topic`` (string; wins over the ``topic`` option per row), ``partition`` (int; the
producer's partitioner picks one when null or absent) and ``headers``
(``array<struct<key:string,value:binary>>``); other columns are ignored. The columns are
checked when the writer is created on the driver, so a wrong DataFrame fails at plan time.

Delivery is at-least-once: every task produces with an idempotent producer
(``enable.idempotence=true``, ``acks=all``), waits until every record is acknowledged and fails
the task if any is not, so Spark retries the task (``spark.task.maxFailures``); a retried task
writes its rows again, so a reader may see a row twice, never zero times. The producer is
created inside ``write()`` on the executor and closed there.

With ``kafka.transactional.id.prefix`` each task is one Kafka transaction (per-task
atomicity): its producer has the ``transactional.id`` ``<prefix>-<Spark partition id>``,
initialises it (which fences any earlier producer with that id, e.g. a previous attempt of the
same partition, and aborts its open transaction), writes every row in one transaction and
commits it at the end of ``write()``; a failure anywhere (the rows' iterator raising, a
refused record, a failed commit) aborts it, so ``read_committed`` readers see all of a task's
rows or none. Not exactly-once for the job: tasks commit independently, so a job that fails
after some tasks committed leaves theirs visible, and a task that committed but is retried
anyway (its executor lost before Spark heard of the success) writes its rows twice. A task
whose worker dies mid-transaction leaves the transaction open until a retry with the same
id fences it or ``transaction.timeout.ms`` (librdkafka default 60 s) lets the broker abort it;
until then it holds back ``read_committed`` readers of those partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from strata.spark.options import SinkOptions, StrataOptionError

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S: Final = 120.0
# InitProducerId, commit and abort: each waits at most this long for the coordinator.
TRANSACTION_TIMEOUT_S: Final = 60.0
PRODUCE_DEFAULTS: Final[Mapping[str, Any]] = {"linger.ms": 5}


@dataclass
class WrittenRows(WriterCommitMessage):
    """What one task wrote (rows acknowledged by the brokers, and committed in the
    transaction ``transactional_id`` when the sink is transactional)."""

    rows: int
    transactional_id: str | None = None


def _is(data_type: DataType, *types: type[DataType]) -> bool:
    return isinstance(data_type, types)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise :class:`StrataOptionError` naming the column or option that is wrong."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise StrataOptionError("value: the DataFrame needs a 'value' column (binary or string)")
    if not _is(fields["value"], BinaryType, StringType):
        raise StrataOptionError(f"value: must be binary or string, not {fields['value']}")
    if "key" in fields and not _is(fields["key"], BinaryType, StringType):
        raise StrataOptionError(f"key: must be binary or string, not {fields['key']}")
    if "topic" in fields:
        if not _is(fields["topic"], StringType):
            raise StrataOptionError(f"topic: the column must be a string, not {fields['topic']}")
    elif options.topic is None:
        raise StrataOptionError("topic: set the 'topic' option or give the DataFrame a 'topic' "
                                "column")
    if "partition" in fields and not _is(fields["partition"], IntegerType):
        raise StrataOptionError(f"partition: must be an int column, not {fields['partition']}")
    if "headers" in fields:
        headers = fields["headers"]
        ok = (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
              and [f.name for f in headers.elementType.fields] == ["key", "value"])
        if not ok:
            raise StrataOptionError(
                f"headers: must be array<struct<key:string,value:binary>>, not {headers}"
            )


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def transactional_id(prefix: str, partition_id: int) -> str:
    """The ``transactional.id`` of the task writing Spark partition ``partition_id``: the same
    for every attempt of that partition, so a retry fences the attempt before it."""
    return f"{prefix}-{partition_id}"


def _task_partition_id() -> int:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("kafka.transactional.id.prefix: the writer runs outside a Spark task")
    return context.partitionId()


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WrittenRows:
    """Produce every row of ``batches``; return once all are acknowledged (and, with a
    transactional id prefix, committed in one transaction), else raise."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    config = {**PRODUCE_DEFAULTS, **options.client_config, "enable.idempotence": True,
              "acks": "all", "delivery.report.only.error": True, "on_delivery": delivered}
    if options.transactional_id_prefix is None:
        return WrittenRows(_produce(Producer(config), options, batches, failures))
    txid = transactional_id(options.transactional_id_prefix, _task_partition_id())
    producer = Producer({**config, "transactional.id": txid})
    producer.init_transactions(TRANSACTION_TIMEOUT_S)
    producer.begin_transaction()
    try:
        rows = _produce(producer, options, batches, failures)
        producer.commit_transaction(TRANSACTION_TIMEOUT_S)
    except BaseException:
        _abort(producer, txid)
        raise
    return WrittenRows(rows, txid)


def _abort(producer: Producer, txid: str) -> None:
    """Abort the task's transaction; a producer that cannot (fenced by a newer attempt, or
    its transaction already timed out) has nothing visible to undo."""
    try:
        producer.abort_transaction(TRANSACTION_TIMEOUT_S)
    except KafkaException as exc:
        log.warning("transactional.id %s: abort failed (%s)", txid, exc)


def _produce(producer: Producer, options: SinkOptions, batches: Iterator[pa.RecordBatch],
             failures: list[KafkaError]) -> int:
    """Send every row and wait until all are acknowledged; raise on the first failure."""
    rows = 0
    for batch in batches:
        values = _column(batch, "value") or []
        count = len(values)
        keys = _column(batch, "key") or [None] * count
        topics = _column(batch, "topic") or [options.topic] * count
        partitions = _column(batch, "partition") or [None] * count
        headers = _column(batch, "headers") or [None] * count
        for value, key, topic, partition, header in zip(
            values, keys, topics, partitions, headers, strict=True
        ):
            topic = topic or options.topic
            if topic is None:
                raise ValueError("topic: a row has a null 'topic' and no 'topic' option is set")
            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if header:
                extra["headers"] = [(h["key"], h["value"]) for h in header]
            while True:
                try:
                    producer.produce(topic, value=value, key=key, **extra)
                    break
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: serve delivery reports
            if failures:
                raise KafkaException(failures[0])
        rows += count
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if failures:
        raise KafkaException(failures[0])
    if remaining:
        raise TimeoutError(f"{remaining} records not acknowledged after {FLUSH_TIMEOUT_S:.0f}s")
    return rows


class StrataBatchWriter(DataSourceArrowWriter):
    """``df.write.format("strata")``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRows:
        return produce_batches(self.options, iterator)


class StrataStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("strata")``: each micro-batch's rows, at least once (with
    ``kafka.transactional.id.prefix``: each task of a micro-batch in one transaction)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRows:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was acknowledged (and its task's transaction committed)
        before its task succeeded."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo here: rows already sent stay (at-least-once); a failed task aborted
        its own transaction, those of tasks that succeeded stay committed."""
