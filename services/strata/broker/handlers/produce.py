"""Produce v3-v13: append client record sets to partition leaders.

The hot path. Per partition the handler looks only at the batch header bytes it needs (magic,
batch length, the transactional flag) — never at records — and hands the record set to
``ReplicaManager.append_records``, which validates, assigns offsets and appends per batch. The
response is written by hand (``encode_produce_response``: ~2 µs instead of ~25 µs for kio's
builder and writer) and returned as a ``Response``; tests check it against kio's bytes.

Versions: v9+ use the flexible encoding (KIP-482; unknown tagged fields in the request are
skipped by the codec). v13 names topics by ``topic_id`` only (KIP-516), in the request and the
response; an id no topic has is UNKNOWN_TOPIC_ID for its partitions. v0-v2 (magic 0/1 message
sets, removed by KIP-896) are advertised but never served: ``refuse_removed_version`` answers
them with UNSUPPORTED_VERSION for every partition (see ``strata.broker.handlers``).

Answers, per partition (Kafka's codes; v8+ also carry ``error_message``):

* NONE with ``base_offset`` (the first offset assigned), ``log_append_time_ms`` (-1 unless the
  topic uses LogAppendTime) and ``log_start_offset``; an idempotent producer's retry of one of
  its last five batches gets NONE with the *original* offsets (Kafka's DUPLICATE handling);
* the storage validator's errors: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
  INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), UNSUPPORTED_COMPRESSION_TYPE;
  producer state: OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID;
  disk: KAFKA_STORAGE_ERROR; partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS (acks=-1 below ``min.insync.replicas``); INVALID_REQUIRED_ACKS;
* records the validator refuses one by one (a keyless record on a compacted topic): the batch
  fails with INVALID_RECORD, nothing of it is appended, and v8+ list every such record in
  ``record_errors`` by ``batch_index`` (KIP-467), Kafka's summary in ``error_message``;
* NOT_LEADER_OR_FOLLOWER, v10+: ``current_leader`` (the leader id and epoch the cluster
  metadata knows, -1/-1 if none) and that leader's endpoint on the request's listener in the
  response's ``node_endpoints`` (KIP-951), so the client moves without a Metadata round trip;
* more than one batch in a partition's record set: INVALID_RECORD (Kafka's rule for v3+);
* authorization (with ``authorizer.class.name``): Write on the topic, else
  TOPIC_AUTHORIZATION_FAILED for its partitions; a ``transactional_id`` needs Write on that
  TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition (Kafka's
  order). An idempotent producer needs nothing more here: InitProducerId checked it (KIP-679);
* transactions: with ``transaction.partition.verification.enable`` the transaction
  coordinator first confirms (or, for Produce v12+ under transactions v2, adds) the partition
  (``produce_verification``, KIP-890); then a transactional batch is appended like any other;
  the log's producer state checks it (INVALID_PRODUCER_EPOCH for a fenced epoch,
  INVALID_TXN_STATE for a non-transactional batch inside an open transaction) and opens the
  producer's transaction at its first offset. A transactional batch in a request without a
  ``transactional_id`` is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka authorizes
  transactional records by that id).

acks=0: the records are appended and no response is sent (the handler returns None). Kafka
closes the connection when such a produce failed; the handler seam cannot do that, so the error
is only logged at debug level.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from strata.broker.broker_state import BrokerEndpoint
from strata.broker.cluster.image import ClusterImage
from strata.broker.handlers.produce_verification import verify_produce
from strata.broker.network.request_context import RequestContext, Response
from strata.broker.replication.partition_results import PartitionAppendResult
from strata.broker.topic_store import TopicStore
from strata.protocol.error_codes import ErrorCode
from strata.security.acl import AclOperation, ResourceType
from strata.storage.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    TRANSACTIONAL_FLAG_MASK,
)

logger = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # attributes is an int16; the flags are its low byte

ONE_BATCH_ONLY = (
    "Produce requests with version 3 or later may only contain exactly one record batch per "
    "partition"
)
_TOPIC_AUTHORIZATION_FAILED = PartitionAppendResult(ErrorCode.topic_authorization_failed)
_UNKNOWN_TOPIC_ID = PartitionAppendResult(
    ErrorCode.unknown_topic_id, error_message="no topic has this topic id")
NOT_LEADER_OR_FOLLOWER = ErrorCode.not_leader_or_follower
_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = PartitionAppendResult(
    ErrorCode.transactional_id_authorization_failed)
_NO_TRANSACTIONAL_ID = PartitionAppendResult(
    ErrorCode.transactional_id_authorization_failed,
    error_message="transactional records in a produce request without a transactional_id")


def _rejection(records: bytes | None, transactional: bool) -> PartitionAppendResult | None:
    """The answer for a record set refused before the log sees it, else None. Reads three
    header fields; anything malformed is left to the log's validator (exact error codes).
    ``transactional``: the request names a (authorized) ``transactional_id``."""
    if records is None or len(records) < HEADER_SIZE or records[MAGIC_OFFSET] != MAGIC_V2:
        return None
    if records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK and not transactional:
        return _NO_TRANSACTIONAL_ID
    size = _BATCH_LENGTH.unpack_from(records, BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    if LOG_OVERHEAD < size < len(records):
        return PartitionAppendResult(ErrorCode.invalid_record, error_message=ONE_BATCH_ONLY)
    return None


async def handle(ctx: RequestContext, request: Any) -> Response | None:
    version = ctx.header.api_version
    acks = request.acks
    state = ctx.state
    refused: PartitionAppendResult | None = None
    transactional = request.transactional_id is not None
    if transactional and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                           request.transactional_id):
        refused = _TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    slots: list[PartitionAppendResult | None] = []
    entries: list[tuple[tuple[str, int], bytes]] = []
    names: list[str | None] = []
    for topic in request.topic_data:
        name = topic_name(state.topic_store, topic.topic_id) if version >= 13 else topic.name
        names.append(name)
        topic_refused = refused
        if topic_refused is None:
            if name is None:
                topic_refused = _UNKNOWN_TOPIC_ID
            elif not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name):
                topic_refused = _TOPIC_AUTHORIZATION_FAILED
        for data in topic.partition_data:
            records = data.records
            early = topic_refused or _rejection(records, transactional)
            slots.append(early)
            if early is None:
                assert name is not None  # an unknown id refused the topic above
                entries.append(((name, data.index), records if records is not None else b""))
    appended: Sequence[PartitionAppendResult] = ()
    if entries and transactional and refused is None:
        verification = await verify_produce(state, request.transactional_id, version, entries)
        if verification.refused:
            entries = _fill(slots, entries, verification.refused)
        guards = verification.guards
    else:
        guards = None
    if entries:
        timeout_ms = int(request.timeout.total_seconds() * 1000)
        appended = await state.replica_manager.append_records(
            entries, acks, timeout_ms, verification_guards=guards)
    if acks == 0:
        if logger.isEnabledFor(logging.DEBUG):
            for result in (*appended, *(s for s in slots if s is not None)):
                if result.error_code:
                    logger.debug("acks=0 produce from %s failed: %s", ctx.client_host,
                                 result.error_message)
        return None
    it = iter(appended)
    results = [slot if slot is not None else next(it) for slot in slots]
    leaders: LeaderHints | None = None
    if version >= 10 and any(r.error_code == NOT_LEADER_OR_FOLLOWER for r in results):
        leaders = _current_leaders(ctx, request.topic_data, names, results)
    return encode_produce_response(version, request.topic_data, results, leaders,
                                   ctx.throttle_time_ms)


def _fill(slots: list[PartitionAppendResult | None],
          entries: list[tuple[tuple[str, int], bytes]],
          refused: dict[int, PartitionAppendResult]) -> list[tuple[tuple[str, int], bytes]]:
    """Put ``refused`` (by entry index) into their empty slots; the entries left to append."""
    kept = []
    it = iter(range(len(entries)))
    for s, slot in enumerate(slots):
        if slot is None:
            index = next(it)
            result = refused.get(index)
            if result is None:
                kept.append(entries[index])
            else:
                slots[s] = result
    return kept


def topic_name(store: TopicStore, topic_id: uuid.UUID | None) -> str | None:
    """The name of the topic with ``topic_id`` (Produce v13), or None if there is none (the
    all-zero id, None here, names no topic). Hits
    of ``_names_by_id`` are checked against the store, so a deleted or recreated topic (a new
    id) is never answered from a stale entry."""
    if topic_id is None:
        return None
    name = _names_by_id.get(topic_id)
    if name is not None:
        record = store.get(name)
        if record is not None and record.topic_id == topic_id:
            return name
        del _names_by_id[topic_id]
    for record in store.topics().values():
        if record.topic_id == topic_id:
            if len(_names_by_id) >= _NAMES_BY_ID_LIMIT:
                _names_by_id.clear()
            _names_by_id[topic_id] = record.name
            return record.name
    return None


# topic id -> name, filled by ``topic_name``; process-wide (ids are unique UUIDs), bounded.
_names_by_id: dict[uuid.UUID, str] = {}
_NAMES_BY_ID_LIMIT = 100_000


class LeaderHints(NamedTuple):
    """KIP-951 for the partitions answered NOT_LEADER_OR_FOLLOWER: result index -> (leader id,
    leader epoch), and the endpoints of those leaders."""

    current_leaders: dict[int, tuple[int, int]]
    node_endpoints: list[BrokerEndpoint]


def _current_leaders(ctx: RequestContext, topics: Sequence[Any], names: Sequence[str | None],
                     results: Sequence[PartitionAppendResult]) -> LeaderHints:
    """The leader each NOT_LEADER_OR_FOLLOWER partition should be produced to, as the cluster
    metadata has it (Kafka's ``getCurrentLeader``); -1/-1 when it knows none."""
    state = ctx.state
    image = state.cluster.image if state.cluster is not None else ClusterImage()
    current: dict[int, tuple[int, int]] = {}
    i = 0
    for topic, name in zip(topics, names, strict=True):
        for data in topic.partition_data:
            if results[i].error_code == NOT_LEADER_OR_FOLLOWER:
                registration = image.partitions.get((name or "", data.index))
                current[i] = ((registration.leader, registration.leader_epoch)
                              if registration is not None and registration.has_leader
                              and registration.leader in image.brokers else (-1, -1))
            i += 1
    wanted = {leader_id for leader_id, _ in current.values() if leader_id >= 0}
    endpoints = [b for b in state.live_brokers(ctx.listener) if b.node_id in wanted]
    return LeaderHints(current, endpoints)


# ---------------------------------------------------------------------- response encoding
# ProduceResponse, Kafka's ProduceResponse.json; big-endian. v3-v8 (non-flexible):
#
#   responses:ARRAY(INT32) =>
#       name:STRING(INT16)
#       partition_responses:ARRAY(INT32) =>
#           index:INT32 error_code:INT16 base_offset:INT64 log_append_time_ms:INT64
#           log_start_offset:INT64                                       (v5+)
#           record_errors:ARRAY(INT32) => batch_index:INT32
#                                         batch_index_error_message:NULLABLE_STRING  (v8+)
#           error_message:NULLABLE_STRING(INT16, -1 = null)                          (v8+)
#   throttle_time_ms:INT32
#
# v9+ (flexible, KIP-482): arrays are COMPACT (UVARINT count + 1), strings COMPACT (UVARINT
# length + 1, 0 = null), and every struct ends in a TAG_BUFFER (UVARINT count, then per tag
# UVARINT tag, UVARINT size, value). v13 writes topic_id:UUID (16 bytes) instead of name.
#   partition TAG_BUFFER, tag 0 (v10+): current_leader => leader_id:INT32 leader_epoch:INT32
#                                                        TAG_BUFFER
#   response TAG_BUFFER, tag 0 (v10+): node_endpoints:COMPACT_ARRAY => node_id:INT32
#                          host:COMPACT_STRING port:INT32 rack:COMPACT_NULLABLE_STRING TAG_BUFFER

_COUNT = struct.Struct(">i")
_NAME = struct.Struct(">h")
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_LEADER = struct.Struct(">ii")
_NO_RECORD_ERRORS_NULL_MESSAGE = b"\x00\x00\x00\x00\xff\xff"  # record_errors [] + null message
_NO_RECORD_ERRORS = b"\x00\x00\x00\x00"
_THROTTLE_ZERO = b"\x00\x00\x00\x00"
# flexible: record_errors [] (count 0 -> 0x01), error_message null (0x00), no tags (0x00)
_FLEX_PARTITION_TAIL = b"\x01\x00\x00"
_NO_TAGS = b"\x00"
_ZERO_UUID = bytes(16)
_MAX_MESSAGE_CHARS = 8000  # <= 32000 bytes in UTF-8: fits an INT16 length


def encode_produce_response(
    version: int, topics: Sequence[Any], results: Sequence[PartitionAppendResult],
    leaders: LeaderHints | None = None, throttle_time_ms: int = 0,
) -> Response:
    """ProduceResponse ``version`` for ``topics`` (the request's ``topic_data``) with one
    result per partition, in request order; ``leaders`` fills KIP-951's fields (v10+);
    ``throttle_time_ms`` is the client-quota throttle (``strata.broker.quotas``)."""
    throttle = _COUNT.pack(throttle_time_ms) if throttle_time_ms else _THROTTLE_ZERO
    if version >= 9:
        return _encode_flexible(version, topics, results, leaders, throttle)
    parts: list[bytes] = [_COUNT.pack(len(topics))]
    append = parts.append
    i = 0
    for topic in topics:
        encoded = topic.name.encode()
        append(_NAME.pack(len(encoded)))
        append(encoded)
        partitions = topic.partition_data
        append(_COUNT.pack(len(partitions)))
        for data in partitions:
            r = results[i]
            i += 1
            if version >= 5:
                append(_PARTITION_V5.pack(data.index, r.error_code, r.base_offset,
                                          r.log_append_time, r.log_start_offset))
            else:
                append(_PARTITION_V3.pack(data.index, r.error_code, r.base_offset,
                                          r.log_append_time))
            if version >= 8:
                message = r.error_message if r.error_code else None
                if message is None:
                    append(_NO_RECORD_ERRORS_NULL_MESSAGE)
                else:
                    append(_COUNT.pack(len(r.record_errors)))
                    for batch_index, batch_message in r.record_errors:
                        append(_COUNT.pack(batch_index))
                        append(_nullable_string(batch_message))
                    append(_nullable_string(message))
    append(throttle)
    return Response([b"".join(parts)], tuple(r.error_code for r in results if r.error_code))


def _encode_flexible(version: int, topics: Sequence[Any],
                     results: Sequence[PartitionAppendResult],
                     leaders: LeaderHints | None, throttle: bytes) -> Response:
    parts: list[bytes] = [_uvarint(len(topics) + 1)]
    append = parts.append
    current = leaders.current_leaders if leaders is not None else {}
    by_id = version >= 13
    i = 0
    for topic in topics:
        if by_id:
            topic_id = topic.topic_id  # kio reads the all-zero id as None
            append(topic_id.bytes if topic_id is not None else _ZERO_UUID)
        else:
            append(_compact_string(topic.name))
        partitions = topic.partition_data
        append(_uvarint(len(partitions) + 1))
        for data in partitions:
            r = results[i]
            append(_PARTITION_V5.pack(data.index, r.error_code, r.base_offset,
                                      r.log_append_time, r.log_start_offset))
            message = r.error_message if r.error_code else None
            leader = current.get(i)
            i += 1
            if message is None and leader is None:
                append(_FLEX_PARTITION_TAIL)
                continue
            append(_uvarint(len(r.record_errors) + 1))
            for batch_index, batch_message in r.record_errors:
                append(_COUNT.pack(batch_index))
                append(_compact_string(batch_message))
                append(_NO_TAGS)
            append(_compact_string(message))
            if leader is None or leader == (-1, -1):  # the default is not written
                append(_NO_TAGS)
            else:  # one tag: 0, size 9 (two INT32 + the struct's empty TAG_BUFFER)
                append(b"\x01\x00\x09" + _LEADER.pack(*leader) + _NO_TAGS)
        append(_NO_TAGS)
    append(throttle)
    endpoints = leaders.node_endpoints if leaders is not None else ()
    if not endpoints:
        append(_NO_TAGS)
    else:
        field = [_uvarint(len(endpoints) + 1)]
        for b in endpoints:
            field += [_COUNT.pack(b.node_id), _compact_string(b.host), _COUNT.pack(b.port),
                      _compact_string(b.rack), _NO_TAGS]
        value = b"".join(field)
        append(b"\x01\x00" + _uvarint(len(value)) + value)
    return Response([b"".join(parts)], tuple(r.error_code for r in results if r.error_code))


def _nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    raw = value[:_MAX_MESSAGE_CHARS].encode()
    return _NAME.pack(len(raw)) + raw


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value[:_MAX_MESSAGE_CHARS].encode()
    return _uvarint(len(raw) + 1) + raw


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# ------------------------------------------------------------------ removed versions v0-v2
# ProduceRequest v0-v2: acks:INT16 timeout_ms:INT32
#   topic_data:ARRAY(INT32) => name:STRING(INT16)
#       partition_data:ARRAY(INT32) => index:INT32 records:NULLABLE_BYTES(INT32)
# ProduceResponse v0: responses:ARRAY => name:STRING partition_responses:ARRAY =>
#   index:INT32 error_code:INT16 base_offset:INT64; v2 adds log_append_time_ms:INT64 per
#   partition; v1+ end with throttle_time_ms:INT32.

_REFUSED_V0 = struct.Struct(">ihq")
_REFUSED_V2 = struct.Struct(">ihqq")


def refuse_removed_version(version: int, body: bytes | memoryview) -> bytes | None:
    """The ProduceResponse ``version`` (0-2) body refusing every partition of the request
    ``body`` with UNSUPPORTED_VERSION, or None when ``acks`` is 0 (no response, as for any
    acks=0 produce). Raises ``ValueError`` for a body that does not parse."""
    try:
        acks = _NAME.unpack_from(body, 0)[0]
        pos = 6  # acks, timeout_ms
        (topic_count,) = _COUNT.unpack_from(body, pos)
        pos += 4
        if topic_count < 0 or topic_count > len(body):
            raise ValueError(f"invalid topic count {topic_count}")
        parts: list[bytes] = [_COUNT.pack(topic_count)]
        for _ in range(topic_count):
            (length,) = _NAME.unpack_from(body, pos)
            if length < 0 or pos + 2 + length > len(body):
                raise ValueError(f"invalid topic name length {length}")
            parts.append(bytes(body[pos:pos + 2 + length]))
            pos += 2 + length
            (partition_count,) = _COUNT.unpack_from(body, pos)
            pos += 4
            if partition_count < 0 or partition_count > len(body):
                raise ValueError(f"invalid partition count {partition_count}")
            parts.append(_COUNT.pack(partition_count))
            for _ in range(partition_count):
                index, size = struct.unpack_from(">ii", body, pos)
                pos += 8 + max(size, 0)
                if size < -1 or pos > len(body):
                    raise ValueError(f"invalid records length {size}")
                parts.append(_REFUSED_V2.pack(index, ErrorCode.unsupported_version, -1, -1)
                             if version >= 2 else
                             _REFUSED_V0.pack(index, ErrorCode.unsupported_version, -1))
    except struct.error as exc:
        raise ValueError(f"truncated ProduceRequest v{version}: {exc}") from None
    if acks == 0:
        return None
    if version >= 1:
        parts.append(_THROTTLE_ZERO)
    return b"".join(parts)
