"""Every Kafka-protocol call of the ``strata`` source and sink, through confluent-kafka
(except plaintext reads, which :mod:`strata.spark.partition_fetcher` serves with raw Fetch).

Driver side (planning): :func:`discover_partitions`, :func:`watermarks` and
:func:`offsets_for_timestamp` open a short-lived consumer per call and close it; the first two
use the caller's :func:`planning_consumer` instead when it keeps one between calls (the
streaming reader, which plans every trigger). Executor side:
:func:`read_range` reads one :class:`~strata.spark.offsets.OffsetRange` into Arrow record
batches. Invariants:

- nothing here is held on an object Spark pickles: each function opens and closes its own
  client, or uses the one its caller keeps out of its pickled state, so readers and writers
  stay picklable;
- consumers only ``assign()`` explicit partitions at explicit offsets with
  ``enable.auto.commit=false`` and never commit: offsets live in Spark's checkpoint only (a
  ``group.id`` is still set because confluent-kafka requires one; it is never joined);
- :func:`read_range` yields exactly the records ``from_offset <= offset < until_offset`` that
  the log holds (offsets missing in between were compacted away). Over TLS or SASL it builds
  each Arrow column from the client's message list with ``map`` over C accessors (the client
  still makes a ``Message`` and key/value bytes per record: ~10x slower than the direct path).
"""

from __future__ import annotations

import bisect
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from strata.spark import partition_fetcher
from strata.spark.offsets import DataLossError, OffsetRange, Positions
from strata.spark.offsets import TopicPartition as TP
from strata.spark.options import SourceOptions
from strata.spark.schema import arrow_schema

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S: Final = 30.0
# Messages asked of the client per call; also the largest Arrow batch read() yields.
CONSUME_BATCH: Final = 10_000
# Client settings tuned for draining a partition fast (a user's kafka.* option wins).
READ_DEFAULTS: Final[Mapping[str, str]] = {
    "fetch.wait.max.ms": "100",
    # librdkafka's default (1000 ms) stalls fetching whenever Python drains slower than it fills.
    "fetch.queue.backoff.ms": "10",
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
}
# Arrow's binary type has 32-bit offsets: a batch column holds at most this many bytes.
MAX_BINARY_BYTES: Final = 2**31 - 1


def consumer_config(options: SourceOptions, role: str) -> dict[str, Any]:
    """The consumer settings for ``role`` (``driver`` or ``executor``)."""
    config: dict[str, Any] = {
        **READ_DEFAULTS,
        "group.id": f"strata-spark-{role}-{uuid.uuid4()}",
        **options.client_config,
    }
    # Spark's default (the Java consumer's) unless kafka.isolation.level says read_committed;
    # librdkafka's own default is read_committed. Watermarks asked with it are the last stable
    # offset under read_committed, so "latest" never passes an open transaction.
    config["isolation.level"] = options.isolation_level
    config["enable.auto.commit"] = False
    config["enable.auto.offset.store"] = False
    config["enable.partition.eof"] = False
    # Out of range (below the log start): jump to the log start, where read_range sees the gap
    # and reports data loss, rather than to the end (librdkafka's default) and wait forever.
    config["auto.offset.reset"] = "earliest"
    return config


def _check_error(partition: TopicPartition, what: str) -> None:
    if partition.error is not None:
        raise KafkaException(partition.error)
    if partition.offset is None:
        raise RuntimeError(f"{what}: no offset for {partition.topic}-{partition.partition}")


@contextmanager
def _driver_consumer(options: SourceOptions, kept: Consumer | None) -> Iterator[Consumer]:
    """``kept`` if the caller keeps a consumer between calls, else a new one closed after."""
    if kept is not None:
        yield kept
        return
    consumer = planning_consumer(options)
    try:
        yield consumer
    finally:
        consumer.close()


def planning_consumer(options: SourceOptions) -> Consumer:
    """A driver-side consumer to keep between planning calls (a streaming query plans every
    trigger; a new librdkafka client costs ~60 ms to bootstrap). Its holder must not let Spark
    pickle it and must ``close()`` it."""
    return Consumer(consumer_config(options, "driver"))


def discover_partitions(options: SourceOptions, consumer: Consumer | None = None) -> list[TP]:
    """The partitions the subscription names right now, sorted.

    ``subscribe`` topics that do not exist (yet) contribute none, like a Kafka consumer; an
    ``assign`` partition that does not exist is an error naming it. ``consumer``: a kept
    :func:`planning_consumer`, else one is opened for the call.
    """
    with _driver_consumer(options, consumer) as client:
        metadata = client.list_topics(timeout=METADATA_TIMEOUT_S)
    found: list[TP] = []
    for name, topic in metadata.topics.items():
        if topic.error is not None or not options.matches(name):
            continue
        found.extend((name, p) for p in topic.partitions)
    if options.subscription == "assign":
        existing = set(found)
        wanted = [(t, p) for t, parts in options.assigned.items() for p in parts]
        missing = [f"{t}-{p}" for t, p in wanted if (t, p) not in existing]
        if missing:
            raise ValueError(f"assign: partitions do not exist: {', '.join(missing)}")
        return sorted(wanted)
    return sorted(found)


def watermarks(options: SourceOptions, partitions: Iterable[TP],
               consumer: Consumer | None = None) -> tuple[Positions, Positions]:
    """``(log_start_offset, latest)`` per partition, asked of the leaders now; ``latest`` is
    the high watermark, or the last stable offset under ``read_committed`` (the consumer asks
    ListOffsets with its isolation level, as the Java consumer's ``endOffsets`` does)."""
    log_start: Positions = {}
    latest: Positions = {}
    with _driver_consumer(options, consumer) as client:
        for topic, partition in partitions:
            low, high = client.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
            )
            log_start[(topic, partition)] = int(low)
            latest[(topic, partition)] = int(high)
    return log_start, latest


def offsets_for_timestamp(
    options: SourceOptions, partitions: Iterable[TP], timestamp_ms: int, latest: Positions
) -> Positions:
    """Per partition, the first offset whose timestamp is >= ``timestamp_ms``; the high
    watermark where no record is that recent (reading then starts with the next record)."""
    wanted = [TopicPartition(t, p, timestamp_ms) for t, p in partitions]
    if not wanted:
        return {}
    consumer = Consumer(consumer_config(options, "driver"))
    try:
        answered = consumer.offsets_for_times(wanted, timeout=METADATA_TIMEOUT_S)
    finally:
        consumer.close()
    result: Positions = {}
    for tp in answered:
        _check_error(tp, "startingTimestamp")
        key = (tp.topic, tp.partition)
        result[key] = latest[key] if tp.offset < 0 else int(tp.offset)
    return result


def _binary_column(items: list[bytes | None]) -> pa.Array:
    """A binary Arrow array built from one joined buffer and a cumulative-length offsets
    buffer (both made in C), not value by value. All-null (records without keys) is one
    constant; a mix of nulls and values (some tombstones) takes pyarrow's per-value path."""
    nulls = items.count(None)
    if nulls == len(items):
        return pa.nulls(len(items), pa.binary())
    if nulls:
        return pa.array(items, pa.binary())
    present = cast(list[bytes], items)
    offsets = np.zeros(len(present) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, present), dtype=np.int64, count=len(present)),
              out=offsets[1:])
    if offsets[-1] > MAX_BINARY_BYTES:
        return pa.array(present, pa.binary())
    return pa.Array.from_buffers(pa.binary(), len(present), [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(present))])


def _to_batch(messages: list[Message], offsets: list[int], topic: str, partition: int,
              schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    count = len(messages)
    timestamps: list[tuple[int, int]] = list(map(Message.timestamp, messages))
    type_values, millis_values = zip(*timestamps, strict=True) if timestamps else ((), ())
    millis = pa.array(millis_values, pa.int64())
    types = pa.array(type_values, pa.int32())
    columns = [
        _binary_column(list(map(Message.key, messages))),
        _binary_column(list(map(Message.value, messages))),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pc.multiply(millis, 1000).cast(schema.field("timestamp").type),
        # confluent-kafka: 1 CreateTime, 2 LogAppendTime (0 none) -> Spark's 0 / 1 (-1 none)
        pc.subtract(types, 1),
    ]
    if include_headers:
        columns.append(pa.array(
            # A fetched record's headers are a list of (str, bytes | None) pairs, or None.
            [[{"key": k, "value": v} for k, v in cast(list[tuple[str, bytes | None]], h)]
             if h else None
             for h in map(Message.headers, messages)],
            schema.field("headers").type,
        ))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` as Arrow batches (executor side).

    Connections take the direct path
    (:func:`strata.spark.partition_fetcher.read_range_direct`: raw Fetch responses decoded
    column-wise) for PLAINTEXT, SSL and SASL PLAIN/SCRAM; any other login (e.g. GSSAPI) takes
    the librdkafka consumer below.

    If the partition's first available record is past ``from_offset`` because retention
    removed the start, that is data loss: it raises with ``failOnDataLoss=true`` and skips with
    a warning otherwise. Gives up with an error after ``kafkaConsumer.pollTimeoutMs`` without
    a record while records are still expected.
    """
    if partition_fetcher.supports(options):
        yield from partition_fetcher.read_range_direct(options, offset_range)
        return
    schema = arrow_schema(options.include_headers)
    topic, partition = offset_range.topic, offset_range.partition
    until = offset_range.until_offset
    expected = offset_range.from_offset
    consumer = Consumer(consumer_config(options, "executor"))
    try:
        consumer.assign([TopicPartition(topic, partition, expected)])
        timeout_s = options.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        while expected < until:
            messages = consumer.consume(num_messages=min(CONSUME_BATCH, until - expected),
                                        timeout=0.5)
            if not messages:
                if _position(consumer, topic, partition) >= until:
                    break  # the range ends in records the client skips (transaction markers)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{topic}-{partition}: no record for {timeout_s:.0f}s while offsets "
                        f"{expected}..{until - 1} were expected (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            errors = [e for e in map(Message.error, messages) if e is not None]
            if errors:
                raise KafkaException(errors[0])
            # Fetched records always have an offset (None is only for messages being produced).
            offsets = cast(list[int], list(map(Message.offset, messages)))
            if offsets[0] > expected:
                _check_gap(consumer, options, topic, partition, expected, offsets[0])
            cut = bisect.bisect_left(offsets, until)
            if cut:
                yield _to_batch(messages[:cut] if cut < len(messages) else messages,
                                offsets[:cut] if cut < len(offsets) else offsets,
                                topic, partition, schema, options.include_headers)
            expected = until if cut < len(offsets) else offsets[-1] + 1
    finally:
        consumer.close()


def _position(consumer: Consumer, topic: str, partition: int) -> int:
    """The consumer's next offset to deliver (negative before the first record)."""
    return int(consumer.position([TopicPartition(topic, partition)])[0].offset)


def _check_gap(consumer: Consumer, options: SourceOptions, topic: str, partition: int,
               expected: int, got: int) -> None:
    """Offsets ``expected..got-1`` were skipped: compaction (fine) or retention (data loss)."""
    low, _high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
    )
    if low <= expected:
        return  # compacted away (or control records): not a loss
    message = (f"{topic}-{partition}: offsets {expected}..{min(low, got) - 1} were removed from "
               f"the log (log start offset is {low})")
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. Set failOnDataLoss=false to skip lost offsets.")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)

