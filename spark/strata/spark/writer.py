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

With ``kafka.transactional.id.prefix`` each task writes in one Kafka transaction and the
driver commits them all once every task succeeded (:mod:`strata.spark.task_transactions`
explains why a task cannot commit its own): the task's producer has the ``transactional.id``
``<prefix>-<Spark partition id>``, initialises it (fencing any earlier producer with that id,
e.g. a previous attempt of the same partition, and aborting its open transaction), writes and
flushes its rows and returns the open transaction in its commit message; a failure the task
sees (a refused record) aborts it there. The driver's ``commit`` ends each with
``EndTxn(commit)``; its ``abort`` aborts them and fences the ids of the failed tasks, so
``read_committed`` readers see all of a job's (or micro-batch's) rows or none of them. Limits:
the commits are one request per task, not atomic together (a driver failing half-way through
them leaves the other half open until ``transaction.timeout.ms``); every transaction must be
committed within ``transaction.timeout.ms`` (librdkafka default 60 s, raise it with
``kafka.transaction.timeout.ms`` up to the broker's ``transaction.max.timeout.ms``) of its
task's first row; a streaming micro-batch committed to Kafka but not yet to the checkpoint
(the driver lost in between) is written again on restart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
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
from strata.spark.task_transactions import (
    PendingTransaction,
    TransactionError,
    check_login,
    end_transaction,
    fence,
    producer_identity,
)

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S: Final = 120.0
# InitProducerId, commit and abort: each waits at most this long for the coordinator.
TRANSACTION_TIMEOUT_S: Final = 60.0
PRODUCE_DEFAULTS: Final[Mapping[str, Any]] = {"linger.ms": 5}


@dataclass
class WrittenRows(WriterCommitMessage):
    """What one task wrote: rows acknowledged by the brokers and, when the sink is
    transactional and the task wrote rows, the open transaction holding them."""

    rows: int
    pending: PendingTransaction | None = None


def _is(data_type: DataType, *types: type[DataType]) -> bool:
    return isinstance(data_type, types)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise :class:`StrataOptionError` naming the column or option that is wrong (also a
    transactional sink's login the driver could not commit with)."""
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
    if options.transactional_id_prefix is not None:
        check_login(options.client_config)


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
    """Produce every row of ``batches``; return once all are acknowledged, else raise. With a
    transactional id prefix the rows are in one transaction, left open for the driver's
    ``commit``/``abort`` (aborted here if this task sees a failure)."""
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
    producer_id, producer_epoch = producer_identity(options.client_config, txid)
    producer.begin_transaction()
    try:
        rows = _produce(producer, options, batches, failures)
    except BaseException:
        _abort(producer, txid)
        raise
    # Left open (destroying the producer does not end it): the driver commits or aborts it.
    return WrittenRows(rows, PendingTransaction(txid, producer_id, producer_epoch)
                       if rows else None)


def commit_tasks(options: SinkOptions, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Driver side, every task succeeded: commit each task's transaction."""
    for message in messages:
        if isinstance(message, WrittenRows) and message.pending is not None:
            end_transaction(options.client_config, message.pending, commit=True)


def abort_tasks(options: SinkOptions, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Driver side, the job failed: abort the successful tasks' transactions and fence the
    ids of the others (``messages[i]`` is partition ``i``'s, ``None`` where it failed)."""
    prefix = options.transactional_id_prefix
    if prefix is None:
        return
    for partition, message in enumerate(messages):
        if isinstance(message, WrittenRows):
            if message.pending is not None:
                try:
                    end_transaction(options.client_config, message.pending, commit=False)
                except TransactionError as exc:
                    log.warning("%s", exc)  # fenced or timed out: aborted already
        else:
            fence(options.client_config, [transactional_id(prefix, partition)],
                  TRANSACTION_TIMEOUT_S)


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

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit the tasks' transactions (transactional sink; otherwise nothing to do)."""
        commit_tasks(self.options, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Abort the tasks' transactions (transactional sink; otherwise rows stay)."""
        abort_tasks(self.options, messages)


class StrataStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("strata")``: each micro-batch's rows, at least once (with
    ``kafka.transactional.id.prefix``: a micro-batch's rows all visible once its tasks'
    transactions are committed by ``commit``, or none)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRows:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the micro-batch's transactions (transactional sink; otherwise every row was
        acknowledged before its task succeeded: nothing to do)."""
        commit_tasks(self.options, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Abort the micro-batch's transactions (transactional sink; otherwise rows already
        sent stay: at-least-once)."""
        abort_tasks(self.options, messages)
