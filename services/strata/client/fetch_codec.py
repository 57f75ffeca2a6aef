"""Fetch v11 by hand, for every client that fetches records: the request a follower sends and
the one FetchResponse reader, records left in the response frame. Pure: bytes in, bytes or
tuples out.

Why by hand: a follower fetches many times a second per leader, and Spark drains a partition at
hundreds of MB/s; kio's generic builder and writer cost ~0.6 ms per FetchRequest and its reader
copies every record byte, which made them a third of a follower's CPU under acks=all. These take
microseconds, and a partition's ``records`` is a ``memoryview`` into the frame (valid while the
caller keeps the frame unchanged: Spark reuses one buffer per connection; the follower's view is
read-only).

Grammar (Kafka's FetchRequest.json / FetchResponse.json, version 11; big-endian)::

    FetchRequest v11 =>
        replica_id:INT32 max_wait_ms:INT32 min_bytes:INT32 max_bytes:INT32
        isolation_level:INT8 session_id:INT32 session_epoch:INT32
        topics:ARRAY(INT32) => topic:STRING(INT16)
            partitions:ARRAY(INT32) => partition:INT32 current_leader_epoch:INT32
                fetch_offset:INT64 log_start_offset:INT64 partition_max_bytes:INT32
        forgotten_topics_data:ARRAY(INT32) => topic:STRING partitions:ARRAY(INT32)
        rack_id:STRING(INT16)

    FetchResponse v11 =>
        throttle_time_ms:INT32 error_code:INT16 session_id:INT32
        responses:ARRAY(INT32) => topic:STRING(INT16)
            partitions:ARRAY(INT32) => partition_index:INT32 error_code:INT16
                high_watermark:INT64 last_stable_offset:INT64 log_start_offset:INT64
                aborted_transactions:NULLABLE ARRAY(INT32, -1 null) =>
                    producer_id:INT64 first_offset:INT64
                preferred_read_replica:INT32
                records:NULLABLE_BYTES(INT32, -1 null)

The follower's choices in the request: read_uncommitted, its log start offset per partition
(``FetchPosition.log_start_offset``: what the leader's DeleteRecords waits for), no rack; a fetch
session (KIP-227) when the caller passes one (``FetchSessionHandler``), else none (id 0, epoch
-1) and nothing forgotten. ``decode_fetch_response`` returns named tuples
with kio's field names (error codes as ``ErrorCode``; ``records`` None when null) and raises
``InvalidResponse`` for anything it cannot read exactly: a length past the end, a negative
length or count, bytes after the body, an error code Kafka does not define.
``read_fetch_response`` is the follower's form: None instead of the exception — then the caller
decodes the same bytes with the generic codec, whose error says what is wrong. Tests compare
both directions with kio's encoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import InvalidResponse
from strata.protocol.primitives import BytesLike

FETCH_VERSION: Final = 11

_REQUEST_HEAD = struct.Struct(">iiiibii")
_COUNT = struct.Struct(">i")
_LENGTH = struct.Struct(">h")
_REQUEST_PARTITION = struct.Struct(">iiqqi")
_NO_FORGOTTEN_TOPICS_NO_RACK = b"\x00\x00\x00\x00\x00\x00"  # [] then ""
_NO_RACK = b"\x00\x00"  # ""
_RESPONSE_HEAD = struct.Struct(">ihi")
_RESPONSE_PARTITION = struct.Struct(">ihqqqi")  # ... log_start_offset, aborted count
_ABORTED_TRANSACTION = struct.Struct(">qq")
_RESPONSE_PARTITION_TAIL = struct.Struct(">ii")  # preferred_read_replica, records length


class FetchPosition(NamedTuple):
    """One partition of a follower's FetchRequest."""

    topic: str
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1  # the fetcher's own (-1: not a replica, or unknown)


def encode_fetch_request(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                         positions: Iterable[FetchPosition], *, session_id: int = 0,
                         session_epoch: int = -1,
                         forgotten: Iterable[tuple[str, int]] = ()) -> bytes:
    """The body of a FetchRequest v11 for ``positions`` (grouped by topic in first-seen
    order, as the generic builder does); sessionless unless ``session_id`` /
    ``session_epoch`` say otherwise (KIP-227), with ``forgotten`` partitions leaving the
    session."""
    by_topic: dict[str, list[FetchPosition]] = {}
    for position in positions:
        by_topic.setdefault(position.topic, []).append(position)
    parts = [_REQUEST_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id,
                                session_epoch),
             _COUNT.pack(len(by_topic))]
    for topic, entries in by_topic.items():
        name = topic.encode()
        parts += (_LENGTH.pack(len(name)), name, _COUNT.pack(len(entries)))
        parts += (_REQUEST_PARTITION.pack(p.partition, p.current_leader_epoch, p.fetch_offset,
                                          p.log_start_offset, p.partition_max_bytes)
                  for p in entries)
    forgotten_by_topic: dict[str, list[int]] = {}
    for topic, index in forgotten:
        forgotten_by_topic.setdefault(topic, []).append(index)
    if not forgotten_by_topic:
        parts.append(_NO_FORGOTTEN_TOPICS_NO_RACK)
        return b"".join(parts)
    parts.append(_COUNT.pack(len(forgotten_by_topic)))
    for topic, indexes in forgotten_by_topic.items():
        name = topic.encode()
        parts += (_LENGTH.pack(len(name)), name, _COUNT.pack(len(indexes)))
        parts += (_COUNT.pack(index) for index in indexes)
    parts.append(_NO_RACK)
    return b"".join(parts)


@dataclass(frozen=True)
class AbortedTransaction:
    """An entry of a read_committed Fetch response's ``aborted_transactions``."""

    producer_id: int
    first_offset: int


class PartitionData(NamedTuple):
    partition_index: int
    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    records: memoryview | None


class FetchableTopicResponse(NamedTuple):
    topic: str
    partitions: tuple[PartitionData, ...]


class FetchResponse(NamedTuple):
    error_code: ErrorCode
    responses: tuple[FetchableTopicResponse, ...]
    session_id: int = 0


def read_fetch_response(buffer: BytesLike, offset: int) -> FetchResponse | None:
    """The FetchResponse v11 body in ``buffer[offset:]``, or None if it is not exactly one
    well-formed body with known error codes."""
    try:
        return decode_fetch_response(memoryview(buffer).toreadonly(), offset)
    except InvalidResponse:
        return None


def decode_fetch_response(buffer: BytesLike, offset: int = 0) -> FetchResponse:
    """The FetchResponse v11 body in ``buffer[offset:]``, which must end the buffer exactly.

    Raises ``InvalidResponse`` saying what is wrong and where."""
    view = memoryview(buffer)
    if view.format != "B":
        view = view.cast("B")
    end = view.nbytes
    pos = offset
    try:
        _need(pos, _RESPONSE_HEAD.size, end)
        _, error_code, session_id = _RESPONSE_HEAD.unpack_from(view, pos)
        pos += _RESPONSE_HEAD.size
        topic_count, pos = _count(view, pos, end)
        topics = []
        for _ in range(topic_count):
            _need(pos, 2, end)
            (length,) = _LENGTH.unpack_from(view, pos)
            pos += 2
            if length < 0:
                raise _Malformed(f"negative topic name length {length}")
            _need(pos, length, end)
            name = str(view[pos:pos + length], "utf-8")
            pos += length
            partition_count, pos = _count(view, pos, end)
            partitions = []
            for _ in range(partition_count):
                _need(pos, _RESPONSE_PARTITION.size, end)
                index, code, high_watermark, last_stable, log_start, count = (
                    _RESPONSE_PARTITION.unpack_from(view, pos))
                pos += _RESPONSE_PARTITION.size
                aborted = None
                if count != -1:
                    if count < 0:
                        raise _Malformed(f"aborted transaction count {count}")
                    size = count * _ABORTED_TRANSACTION.size
                    _need(pos, size, end)
                    aborted = tuple(AbortedTransaction(*_ABORTED_TRANSACTION.unpack_from(view, at))
                                    for at in range(pos, pos + size, _ABORTED_TRANSACTION.size))
                    pos += size
                _need(pos, _RESPONSE_PARTITION_TAIL.size, end)
                _, size = _RESPONSE_PARTITION_TAIL.unpack_from(view, pos)
                pos += _RESPONSE_PARTITION_TAIL.size
                records = None
                if size != -1:
                    if size < 0:
                        raise _Malformed(f"records length {size}")
                    _need(pos, size, end)
                    records = view[pos:pos + size]
                    pos += size
                partitions.append(PartitionData(index, ErrorCode(code), high_watermark,
                                                last_stable, log_start, aborted, records))
            topics.append(FetchableTopicResponse(name, tuple(partitions)))
        if pos != end:
            raise _Malformed(f"{end - pos} bytes after the body")
        return FetchResponse(ErrorCode(error_code), tuple(topics), session_id)
    except _Malformed as exc:
        raise InvalidResponse(f"FetchResponse v{FETCH_VERSION} at byte {pos}: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidResponse(f"FetchResponse v{FETCH_VERSION}: a topic name is not UTF-8"
                              ) from None
    except ValueError as exc:  # ErrorCode(code) for a code Kafka does not define
        raise InvalidResponse(f"FetchResponse v{FETCH_VERSION}: {exc}") from None


class _Malformed(Exception):
    pass


def _need(pos: int, size: int, end: int) -> None:
    if pos + size > end:
        raise _Malformed(f"{size} bytes at {pos} pass the end of the {end}-byte frame")


def _count(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    _need(pos, 4, end)
    (count,) = _COUNT.unpack_from(view, pos)
    if count < 0 or count > end - pos:  # each element takes at least one byte
        raise _Malformed(f"array count {count}")
    return count, pos + 4
