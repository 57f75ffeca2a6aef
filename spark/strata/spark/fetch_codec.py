"""FetchResponse v11 read by hand on the source's side, records left in place.

Owns :func:`parse_fetch_response`. kio's reader (used everywhere else through
:mod:`strata.protocol`) copies each partition's ``records`` into a new ``bytes``; a reader that
drains a partition at hundreds of MB/s only needs to look at them, so here they are a
``memoryview`` into the response frame (valid while the caller keeps the frame unchanged).
Pure: bytes in, values out.

Grammar (Kafka's FetchResponse.json at v11, non-flexible; big-endian)::

    throttle_time_ms:INT32 error_code:INT16 session_id:INT32
    responses:ARRAY(INT32) => topic:STRING(INT16)
        partitions:ARRAY(INT32) => partition_index:INT32 error_code:INT16
            high_watermark:INT64 last_stable_offset:INT64 log_start_offset:INT64
            aborted_transactions:NULLABLE ARRAY(INT32, -1 = null) =>
                producer_id:INT64 first_offset:INT64
            preferred_read_replica:INT32
            records:NULLABLE_BYTES(INT32, -1 = null)

Malformed input (a length past the end of the frame) raises :class:`InvalidResponse`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from strata.protocol import InvalidResponse
from strata.spark.record_columns import AbortedTransaction

VERSION: Final = 11
_HEAD = struct.Struct(">ihii")  # throttle_time_ms error_code session_id topic count
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqqqi")  # ... up to the aborted_transactions count
_ABORTED = struct.Struct(">qq")
_TAIL = struct.Struct(">ii")  # preferred_read_replica, records length


@dataclass(frozen=True)
class PartitionAnswer:
    """One partition of a FetchResponse; ``records`` is a view into the frame."""

    topic: str
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    records: memoryview


def _need(frame: memoryview, pos: int, size: int) -> None:
    if size < 0 or pos + size > len(frame):
        raise InvalidResponse(f"FetchResponse v{VERSION}: {size} bytes at {pos} pass the end "
                              f"of the {len(frame)}-byte frame")


def parse_fetch_response(body: memoryview) -> tuple[int, list[PartitionAnswer]]:
    """``(top-level error_code, partitions)`` of a response body (after the header)."""
    frame = body.cast("B") if body.format != "B" else body
    _need(frame, 0, _HEAD.size)
    _throttle, error_code, _session, topics = _HEAD.unpack_from(frame, 0)
    pos = _HEAD.size
    answers: list[PartitionAnswer] = []
    for _ in range(topics):
        _need(frame, pos, 2)
        (length,) = _I16.unpack_from(frame, pos)
        _need(frame, pos + 2, length + 4)
        topic = bytes(frame[pos + 2:pos + 2 + length]).decode("utf-8")
        pos += 2 + length
        (partitions,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(partitions):
            _need(frame, pos, _PARTITION.size)
            index, error, high, stable, log_start, count = _PARTITION.unpack_from(frame, pos)
            pos += _PARTITION.size
            aborted = None
            if count >= 0:
                _need(frame, pos, count * _ABORTED.size)
                aborted = tuple(AbortedTransaction(*_ABORTED.unpack_from(frame, at))
                                for at in range(pos, pos + count * _ABORTED.size, _ABORTED.size))
                pos += count * _ABORTED.size
            _need(frame, pos, _TAIL.size)
            _replica, size = _TAIL.unpack_from(frame, pos)
            pos += _TAIL.size
            _need(frame, pos, max(size, 0))
            records = frame[pos:pos + max(size, 0)]
            pos += max(size, 0)
            answers.append(PartitionAnswer(topic, index, error, high, stable, log_start,
                                           aborted, records))
    return error_code, answers
