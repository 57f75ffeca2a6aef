"""FetchResponse v4-v18 written by hand into ``Response`` chunks, records as ``FileSlice``s.

kio's generic writer copies every record byte into the body and costs ~40 µs per response;
this encoder packs the fixed-size fields with precompiled ``struct``s and leaves the records
where they are: each partition's records are ``FileSlice``s that the connection sends with
``os.sendfile`` (zero copy) — in the flexible versions too, whose length prefix (an unsigned
varint) is known from the slices' size. The bytes are identical to kio's encoding of the same
response (``tests/unit/broker/test_fetch_response.py`` and ``test_fetch_versions.py`` check
every version, and kafka-python decodes our output too).

Grammar (Kafka's FetchResponse.json; big-endian; v12+ flexible: COMPACT = unsigned varint of
length + 1, 0 = null; TAGS = tagged fields, a varint count then (tag, size, value) each)::

    FetchResponse v4-v11 =>
        throttle_time_ms:INT32
        error_code:INT16                                   (v7+)
        session_id:INT32                                   (v7+)
        responses:ARRAY(INT32 count) =>
            topic:STRING(INT16 length)
            partitions:ARRAY(INT32 count) =>
                partition_index:INT32
                error_code:INT16
                high_watermark:INT64
                last_stable_offset:INT64
                log_start_offset:INT64                     (v5+)
                aborted_transactions:NULLABLE ARRAY(INT32 count, -1 = null) =>
                    producer_id:INT64 first_offset:INT64
                preferred_read_replica:INT32               (v11+)
                records:NULLABLE_BYTES(INT32 length)

    FetchResponse v12-v18 =>
        throttle_time_ms:INT32 error_code:INT16 session_id:INT32
        responses:COMPACT_ARRAY =>
            topic:COMPACT_STRING (v12) | topic_id:UUID (v13+)
            partitions:COMPACT_ARRAY =>
                partition_index:INT32 error_code:INT16 high_watermark:INT64
                last_stable_offset:INT64 log_start_offset:INT64
                aborted_transactions:COMPACT_NULLABLE_ARRAY
                preferred_read_replica:INT32
                records:COMPACT_NULLABLE_RECORDS
                TAGS: 0 diverging_epoch (epoch:INT32 end_offset:INT64 TAGS),
                      1 current_leader (leader_id:INT32 leader_epoch:INT32 TAGS)
            TAGS
        TAGS: 0 node_endpoints (v16+): COMPACT_ARRAY => node_id:INT32 host:COMPACT_STRING
              port:INT32 rack:COMPACT_NULLABLE_STRING TAGS

Strata's choices (consumers fetch from leaders only; no KRaft snapshots):
``aborted_transactions`` is null for read_uncommitted fetches and, for read_committed ones, the
aborted transactions the partition's records overlap (``FetchPartitionResult``), else empty
(what Kafka sends); ``preferred_read_replica`` is -1; ``records`` is never null (an empty set on
errors, like Kafka's ``MemoryRecords.EMPTY``); ``snapshot_id`` is never sent. A tagged field is
written only when it differs from its default, as Kafka's generated writers do:
``diverging_epoch`` and ``current_leader`` per partition when given (``PartitionTags``),
``node_endpoints`` when any.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from strata.broker.network.request_context import Response
from strata.broker.replication.partition_results import FetchPartitionResult
from strata.storage.file_records import FileSlice

MIN_VERSION = 4
MAX_VERSION = 18
FIRST_FLEXIBLE_VERSION = 12
FIRST_TOPIC_ID_VERSION = 13
FIRST_NODE_ENDPOINTS_VERSION = 16

_HEADER_V4 = struct.Struct(">ii")  # throttle_time_ms, topic count
_HEADER_V7 = struct.Struct(">ihii")  # throttle_time_ms, error_code, session_id, topic count
_HEADER_V12 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_TOPIC = struct.Struct(">h")  # name length (the name, then _COUNT)
_COUNT = struct.Struct(">i")
# partition_index, error_code, high_watermark, last_stable_offset, [log_start_offset],
# aborted_transactions count, [preferred_read_replica], records length
_PARTITION_V4 = struct.Struct(">ihqqii")
_PARTITION_V5 = struct.Struct(">ihqqqii")
_PARTITION_V11 = struct.Struct(">ihqqqiii")
# ... log_start_offset, aborted_transactions (compact: 0 null, 1 empty), preferred_read_replica;
# then the records' varint length, the records, the tags
_PARTITION_V12 = struct.Struct(">ihqqqBi")
_PARTITION_V12_HEAD = struct.Struct(">ihqqq")  # up to log_start_offset
_ABORTED_TXN = struct.Struct(">qq")  # producer_id, first_offset
_EPOCH_END_OFFSET = struct.Struct(">iq")
_LEADER_ID_AND_EPOCH = struct.Struct(">ii")
_INT32 = struct.Struct(">i")

NULL_ARRAY = -1
NO_PREFERRED_READ_REPLICA = -1
_NO_TAGS = b"\x00"


class PartitionTags(NamedTuple):
    """A partition's tagged fields (Fetch v12+): ``diverging_epoch`` (epoch, end offset) when
    the fetcher's log diverged; ``current_leader`` (leader id, leader epoch) with
    NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (v16+)."""

    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None


class NodeEndpoint(NamedTuple):
    """An entry of ``node_endpoints`` (v16+, KIP-951): a leader named by ``current_leader``."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


PartitionResults = Sequence[tuple[int, FetchPartitionResult]
                            | tuple[int, FetchPartitionResult, PartitionTags | None]]
TopicResults = tuple[str | uuid.UUID, PartitionResults]
"""(topic name, or its id from v13, [(partition_index, result[, tags]), ...])."""


def encode_fetch_response(
    version: int,
    topics: Sequence[TopicResults],
    *,
    read_committed: bool,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> Response:
    """The body of a FetchResponse ``version`` (4..18) as chunks: ``topics`` in response
    order, each named by its name before v13 and by its topic id from v13."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not written by hand "
                         f"(v{MIN_VERSION}-v{MAX_VERSION} are)")
    if version >= FIRST_FLEXIBLE_VERSION:
        return _encode_flexible(version, topics, read_committed, throttle_time_ms, error_code,
                                session_id, node_endpoints)
    if version >= 7:
        head = _HEADER_V7.pack(throttle_time_ms, error_code, session_id, len(topics))
    else:
        head = _HEADER_V4.pack(throttle_time_ms, len(topics))
    aborted = 0 if read_committed else NULL_ARRAY
    chunks: list[bytes | FileSlice] = []
    errors: list[int] = [error_code] if error_code else []
    parts: list[bytes] = [head]
    append = parts.append
    for name, partitions in topics:
        encoded = str(name).encode()
        append(_TOPIC.pack(len(encoded)))
        append(encoded)
        append(_COUNT.pack(len(partitions)))
        for entry in partitions:
            index, result = entry[0], entry[1]
            if result.aborted_transactions and read_committed:
                append(_aborted_partition(version, index, result))
            elif version >= 11:
                append(_PARTITION_V11.pack(
                    index, result.error_code, result.high_watermark, result.last_stable_offset,
                    result.log_start_offset, aborted, NO_PREFERRED_READ_REPLICA, result.size))
            elif version >= 5:
                append(_PARTITION_V5.pack(
                    index, result.error_code, result.high_watermark, result.last_stable_offset,
                    result.log_start_offset, aborted, result.size))
            else:
                append(_PARTITION_V4.pack(
                    index, result.error_code, result.high_watermark, result.last_stable_offset,
                    aborted, result.size))
            if result.error_code:
                errors.append(result.error_code)
            if result.size:
                chunks.append(b"".join(parts))
                chunks.extend(result.records)
                parts.clear()
    if parts:
        chunks.append(b"".join(parts))
    return Response(chunks, tuple(errors))


def _encode_flexible(version: int, topics: Sequence[TopicResults], read_committed: bool,
                     throttle_time_ms: int, error_code: int, session_id: int,
                     node_endpoints: Sequence[NodeEndpoint]) -> Response:
    aborted = 1 if read_committed else 0  # compact array: empty / null
    pack = _PARTITION_V12.pack
    by_id = version >= FIRST_TOPIC_ID_VERSION
    chunks: list[bytes | FileSlice] = []
    errors: list[int] = [error_code] if error_code else []
    parts: list[bytes] = [_HEADER_V12.pack(throttle_time_ms, error_code, session_id),
                          uvarint(len(topics) + 1)]
    append = parts.append
    for topic, partitions in topics:
        if by_id:
            assert isinstance(topic, uuid.UUID), "Fetch v13+ names topics by id"
            append(topic.bytes)
        else:
            encoded = str(topic).encode()
            append(uvarint(len(encoded) + 1))
            append(encoded)
        append(uvarint(len(partitions) + 1))
        for entry in partitions:
            index, result = entry[0], entry[1]
            size = result.size
            txns = result.aborted_transactions
            if txns and read_committed:
                append(_PARTITION_V12_HEAD.pack(
                    index, result.error_code, result.high_watermark, result.last_stable_offset,
                    result.log_start_offset) + uvarint(len(txns) + 1)
                    + b"".join(_ABORTED_TXN.pack(*t) + _NO_TAGS for t in txns)
                    + _INT32.pack(NO_PREFERRED_READ_REPLICA) + uvarint(size + 1))
            else:
                append(pack(index, result.error_code, result.high_watermark,
                            result.last_stable_offset, result.log_start_offset, aborted,
                            NO_PREFERRED_READ_REPLICA) + uvarint(size + 1))
            if result.error_code:
                errors.append(result.error_code)
            if size:
                chunks.append(b"".join(parts))
                chunks.extend(result.records)
                parts.clear()
            tags = entry[2] if len(entry) > 2 else None
            append(_partition_tags(tags) if tags is not None else _NO_TAGS)
        append(_NO_TAGS)  # the topic's
    if node_endpoints and version >= FIRST_NODE_ENDPOINTS_VERSION:
        value = _node_endpoints(node_endpoints)
        append(b"\x01\x00" + uvarint(len(value)) + value)
    else:
        append(_NO_TAGS)
    chunks.append(b"".join(parts))
    return Response(chunks, tuple(errors))


def _aborted_partition(version: int, index: int, result: FetchPartitionResult) -> bytes:
    """A non-flexible partition's fields up to its records' length, with the aborted
    transactions of a read_committed read listed (the rare case, off the hot path)."""
    txns = result.aborted_transactions or ()
    head = [_INT32.pack(index), struct.pack(">hqq", result.error_code, result.high_watermark,
                                            result.last_stable_offset)]
    if version >= 5:
        head.append(struct.pack(">q", result.log_start_offset))
    head.append(_COUNT.pack(len(txns)))
    head += [_ABORTED_TXN.pack(*t) for t in txns]
    if version >= 11:
        head.append(_INT32.pack(NO_PREFERRED_READ_REPLICA))
    head.append(_INT32.pack(result.size))
    return b"".join(head)


def _partition_tags(tags: PartitionTags) -> bytes:
    fields = []
    if tags.diverging_epoch is not None:
        fields.append(b"\x00\x0d" + _EPOCH_END_OFFSET.pack(*tags.diverging_epoch) + _NO_TAGS)
    if tags.current_leader is not None:
        fields.append(b"\x01\x09" + _LEADER_ID_AND_EPOCH.pack(*tags.current_leader) + _NO_TAGS)
    return uvarint(len(fields)) + b"".join(fields)


def _node_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    out = [uvarint(len(endpoints) + 1)]
    for e in endpoints:
        host = e.host.encode()
        out += (_INT32.pack(e.node_id), uvarint(len(host) + 1), host, _INT32.pack(e.port))
        if e.rack is None:
            out.append(b"\x00")
        else:
            rack = e.rack.encode()
            out += (uvarint(len(rack) + 1), rack)
        out.append(_NO_TAGS)
    return b"".join(out)


_SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint (Kafka's ``ByteUtils.writeUnsignedVarint``)."""
    if value < 128:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
