"""The record browser's reader: one long-lived ``assign()`` consumer, one read at a time.

The REST route's ``browse`` makes a consumer per request, which costs a connection to the
bootstrap broker and to the partition's leader each time (100-700 ms); a page must paint in
under 300 ms, so the console keeps one consumer (``KafkaGateway.consumer()``: no group commit,
``enable.partition.eof``) connected and re-``assign()``s it for each read. Reads are
serialized by a lock (they run on ``KafkaGateway.run``'s worker threads); after a failed read
the consumer is closed and the next read makes a new one. ``close()`` (at the service's
shutdown) closes it.

``read`` follows ``browse``'s rules: from ``start`` (clamped to the log start offset), or the
first record at or after ``timestamp`` (ListOffsets by time), never past the high watermark,
within the service's timeout; bytes are returned exactly as stored. Each ``consume`` asks for
no more records than remain below the high watermark: librdkafka's batch call waits out its
timeout until it has as many as asked for.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from strata.admin.console.record_view import RawRecord
from strata.admin.kafka_gateway import KafkaGateway
from strata.client.kafka_admin import check_partitions, topic_of
from strata.client.kafka_errors import KafkaClientError

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime",
                    TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Batch:
    partitions: list[int]
    log_start_offset: int
    high_watermark: int
    records: list[RawRecord]


def _bytes(data: Any) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


class RecordReader:
    """Reads records of one partition at a time with a consumer kept between reads."""

    def __init__(self, gateway: KafkaGateway) -> None:
        self._gateway = gateway
        self._lock = threading.Lock()
        self._consumer: Consumer | None = None

    def close(self) -> None:
        with self._lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def read(self, name: str, partition: int, start: int | None, timestamp: int | None,
             limit: int, from_end: bool = False) -> Batch:
        with self._lock:
            if self._consumer is None:
                self._consumer = self._gateway.consumer()
            try:
                return self._read(self._consumer, name, partition, start, timestamp, limit,
                                  from_end)
            except BaseException:
                consumer, self._consumer = self._consumer, None
                consumer.close()
                raise

    def _read(self, consumer: Consumer, name: str, partition: int, start: int | None,
              timestamp: int | None, limit: int, from_end: bool) -> Batch:
        timeout = self._gateway.settings.timeout_s
        try:
            metadata = consumer.list_topics(topic=name, timeout=timeout)
        except KafkaException as exc:
            raise KafkaClientError.of(exc, f"topic {name!r}", "Metadata") from None
        topic = topic_of(metadata, name)
        check_partitions(topic, [partition])
        tp = KafkaTopicPartition(name, partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        first = low if start is None else max(start, low)
        if from_end:
            first = max(high - limit, low)
        if timestamp is not None:
            found = consumer.offsets_for_times([KafkaTopicPartition(name, partition, timestamp)],
                                               timeout=timeout)
            first = found[0].offset if found[0].offset >= 0 else high
        out: list[RawRecord] = []
        partitions = sorted(topic.partitions)
        if first >= high or limit == 0:
            return Batch(partitions, low, high, out)
        consumer.assign([KafkaTopicPartition(name, partition, first)])
        try:
            deadline = time.monotonic() + timeout
            next_offset = first
            while len(out) < limit and next_offset < high and time.monotonic() < deadline:
                wanted = min(limit - len(out), high - next_offset, 500)
                for message in consumer.consume(wanted, 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            next_offset = high
                            break
                        raise KafkaClientError.of(error, f"partition {name}-{partition}",
                                                  "Fetch")
                    ts_type, ts = message.timestamp()
                    offset = int(message.offset() or 0)
                    if offset >= high:
                        next_offset = high
                        break
                    out.append(RawRecord(
                        partition, offset, ts, _TIMESTAMP_TYPES.get(ts_type, "NoTimestampType"),
                        _bytes(message.key()), _bytes(message.value()),
                        [(str(k), _bytes(v)) for k, v in list(message.headers() or [])]))
                    next_offset = offset + 1
                    if len(out) >= limit:
                        break
        finally:
            consumer.unassign()
        return Batch(partitions, low, high, out)
