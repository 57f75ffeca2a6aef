"""``/v1/topics/{name}/records``: produce records and browse a partition.

* ``POST``: a JSON array of ``{key, value, headers: [{key, value}], partition}`` produced with
  acks=all through the shared ``Producer``; answers each record's partition and offset, in the
  order given. ``format`` says how keys, values and header values are written: UTF-8 ``text``
  (the default) or ``base64``; malformed base64 is 422. A partition the topic does not have is
  404 UNKNOWN_TOPIC_OR_PARTITION before anything is produced.
* ``GET``: up to ``limit`` records of one ``partition`` from ``offset``, or from the first
  offset whose timestamp is at or after ``timestamp`` (ListOffsets by time), or from the log
  start offset; never past the high watermark. An offset below the log start offset starts at
  the log start offset. A ``Consumer`` made for the request reads with ``assign()`` (no group,
  nothing committed) and is closed after it. ``format=text`` decodes bytes as UTF-8 (invalid
  sequences replaced), ``base64`` returns them exactly.

Authorization (authentication on): producing needs Topic Write, browsing Topic Read (the rights
a Kafka producer and consumer need), checked before anything else.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Annotated, Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from fastapi import APIRouter, Body, Query

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    MAX_BROWSE_LIMIT,
    MAX_PARTITIONS,
    MAX_RECORDS_PER_REQUEST,
    Encoding,
    Header,
    RecordIn,
    RecordMetadata,
    RecordOut,
)
from strata.admin.problems import ProblemError
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.admin.routers.topics import TopicPath, require_topic
from strata.client.kafka_admin import check_partitions
from strata.client.kafka_errors import KafkaClientError
from strata.security.acl import AclOperation

router = APIRouter(prefix="/v1/topics", tags=["records"], responses=PROBLEMS)

FormatQuery = Annotated[Encoding, Query(alias="format",
                                        description="text (UTF-8) or base64 for keys, values "
                                                    "and header values.")]
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime",
                    TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def _encode(text: str | None, encoding: Encoding, where: str) -> bytes | None:
    if text is None:
        return None
    if encoding is Encoding.TEXT:
        return text.encode("utf-8", errors="surrogatepass")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProblemError(422, "VALIDATION_ERROR", f"{where} is not base64") from None


def _decode(data: bytes | None, encoding: Encoding) -> str | None:
    if data is None:
        return None
    if encoding is Encoding.TEXT:
        return data.decode("utf-8", errors="replace")
    return base64.b64encode(data).decode("ascii")


def _bytes(data: str | bytes | None) -> bytes | None:
    """A consumed field as bytes (the consumer has no deserializer, so it gives bytes)."""
    return data.encode() if isinstance(data, str) else data




def produce(gateway: KafkaGateway, name: str, records: list[RecordIn],
            encoding: Encoding) -> list[RecordMetadata]:
    topic = gateway.kafka.topic(name)
    encoded = []
    for i, record in enumerate(records):
        try:
            check_partitions(topic, [] if record.partition is None else [record.partition])
        except KafkaClientError as exc:
            exc.subject = f"record {i}"
            raise
        headers: list[tuple[str, str | bytes | None]] = [
            (h.key, _encode(h.value, encoding, f"record {i} header {h.key!r}"))
            for h in record.headers]
        encoded.append((_encode(record.key, encoding, f"record {i} key"),
                        _encode(record.value, encoding, f"record {i} value"),
                        headers, record.partition))
    results: dict[int, tuple[KafkaError | None, Any]] = {}
    producer = gateway.producer
    for i, (key, value, headers, partition) in enumerate(encoded):
        def delivered(error: KafkaError | None, message: Any, index: int = i) -> None:
            results[index] = (error, message)

        extra: dict[str, Any] = {"partition": partition} if partition is not None else {}
        try:
            producer.produce(name, value=value, key=key, headers=headers or None,
                             on_delivery=delivered, **extra)
        except KafkaException as exc:  # refused locally, e.g. MSG_SIZE_TOO_LARGE
            raise KafkaClientError.of(exc, f"record {i}", "Produce") from None
        except BufferError:
            raise ProblemError.kafka("_QUEUE_FULL", f"record {i}: the producer's queue is "
                                                    "full; retry later") from None
    deadline = time.monotonic() + gateway.settings.timeout_s + 2.0
    while len(results) < len(encoded) and time.monotonic() < deadline:
        producer.flush(min(0.5, max(deadline - time.monotonic(), 0.0)))
    answered = []
    for i in range(len(encoded)):
        if i not in results:
            raise ProblemError.kafka("_MSG_TIMED_OUT", f"record {i} was not acknowledged in "
                                                       f"{gateway.settings.timeout_s:g}s")
        error, message = results[i]
        if error is not None:
            raise KafkaClientError.of(error, f"record {i}", "Produce")
        answered.append(RecordMetadata(partition=message.partition(), offset=message.offset()))
    return answered


def browse(gateway: KafkaGateway, name: str, partition: int, offset: int | None,
           timestamp: int | None, limit: int, encoding: Encoding) -> list[RecordOut]:
    check_partitions(gateway.kafka.topic(name), [partition])
    timeout = gateway.settings.timeout_s
    consumer = gateway.consumer()
    try:
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(name, partition),
                                                   timeout=timeout)
        start = low if offset is None else max(offset, low)
        if timestamp is not None:
            found = consumer.offsets_for_times(
                [KafkaTopicPartition(name, partition, timestamp)], timeout=timeout)
            start = found[0].offset if found[0].offset >= 0 else high
        if start >= high or limit == 0:
            return []
        consumer.assign([KafkaTopicPartition(name, partition, start)])
        out: list[RecordOut] = []
        deadline = time.monotonic() + timeout
        next_offset = start
        while len(out) < limit and next_offset < high and time.monotonic() < deadline:
            for message in consumer.consume(min(limit - len(out), 500), 0.2):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        next_offset = high
                        break
                    raise KafkaClientError.of(error, f"partition {name}-{partition}", "Fetch")
                ts_type, ts = message.timestamp()
                offset = int(message.offset() or 0)
                out.append(RecordOut(
                    topic=name, partition=partition, offset=offset, timestamp=ts,
                    timestamp_type=_TIMESTAMP_TYPES.get(ts_type, "NoTimestampType"),
                    key=_decode(_bytes(message.key()), encoding),
                    value=_decode(_bytes(message.value()), encoding),
                    headers=[Header(key=str(k), value=_decode(_bytes(v), encoding))
                             for k, v in list(message.headers() or [])]))
                next_offset = offset + 1
                if len(out) >= limit:
                    break
        return out
    finally:
        consumer.close()


@router.post("/{name}/records", summary="Produce records (acks=all)")
async def produce_records(
    gateway: GatewayDep, access: AccessDep, name: TopicPath,
    records: Annotated[list[RecordIn], Body(min_length=1, max_length=MAX_RECORDS_PER_REQUEST)],
    encoding: FormatQuery = Encoding.TEXT,
) -> list[RecordMetadata]:
    await require_topic(access, AclOperation.WRITE, name)
    return await gateway.run(produce, gateway, name, records, encoding)


@router.get("/{name}/records", summary="Browse a partition by offset or timestamp")
async def browse_records(
    gateway: GatewayDep, access: AccessDep, name: TopicPath,
    partition: Annotated[int, Query(ge=0, le=MAX_PARTITIONS)] = 0,
    offset: Annotated[int | None, Query(ge=0, le=2**63 - 1,
                                        description="First offset to return.")] = None,
    timestamp: Annotated[int | None, Query(ge=0, le=2**63 - 1,
                                           description="Epoch ms: start at the first record "
                                                       "at or after it.")] = None,
    limit: Annotated[int, Query(ge=0, le=MAX_BROWSE_LIMIT)] = 100,
    encoding: FormatQuery = Encoding.TEXT,
) -> list[RecordOut]:
    if offset is not None and timestamp is not None:
        raise ProblemError(422, "VALIDATION_ERROR", "give offset or timestamp, not both")
    await require_topic(access, AclOperation.READ, name)
    return await gateway.run(browse, gateway, name, partition, offset, timestamp, limit,
                             encoding)
