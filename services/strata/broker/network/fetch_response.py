"""FetchResponse v4-v11 written by hand into ``Response`` chunks, records as ``FileSlice``s.

kio's generic writer copies every record byte into the body and costs ~40 µs per response;
this encoder packs the fixed-size fields with precompiled ``struct``s and leaves the records
where they are: each partition's records are ``FileSlice``s that the connection sends with
``os.sendfile`` (zero copy). The bytes are identical to kio's encoding of the same response
(``tests/unit/broker/test_fetch_response.py`` checks several versions, and decodes our output
with kafka-python too).

Grammar (Kafka's FetchResponse.json, non-flexible versions only; big-endian)::

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

Strata's choices (no transactions, no fetch sessions; consumers fetch from leaders only):
``aborted_transactions`` is empty (count 0) for read_committed fetches and null otherwise (what
Kafka sends); ``preferred_read_replica`` is -1; ``records`` is never null (an empty set on
errors, like Kafka's ``MemoryRecords.EMPTY``); ``session_id`` is whatever the handler passes
(0: sessions declined).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from strata.broker.network.connection import Response
from strata.broker.replication.replica_manager import FetchPartitionResult
from strata.storage.file_records import FileSlice

MIN_VERSION = 4
MAX_VERSION = 11

_HEADER_V4 = struct.Struct(">ii")  # throttle_time_ms, topic count
_HEADER_V7 = struct.Struct(">ihii")  # throttle_time_ms, error_code, session_id, topic count
_TOPIC = struct.Struct(">h")  # name length (the name, then _COUNT)
_COUNT = struct.Struct(">i")
# partition_index, error_code, high_watermark, last_stable_offset, [log_start_offset],
# aborted_transactions count, [preferred_read_replica], records length
_PARTITION_V4 = struct.Struct(">ihqqii")
_PARTITION_V5 = struct.Struct(">ihqqqii")
_PARTITION_V11 = struct.Struct(">ihqqqiii")

NULL_ARRAY = -1
NO_PREFERRED_READ_REPLICA = -1

TopicResults = tuple[str, Sequence[tuple[int, FetchPartitionResult]]]


def encode_fetch_response(
    version: int,
    topics: Sequence[TopicResults],
    *,
    read_committed: bool,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> Response:
    """The body of a FetchResponse ``version`` (4..11) as chunks: ``topics`` is
    ``[(topic, [(partition_index, FetchPartitionResult), ...]), ...]`` in response order."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not written by hand (v4-v11 are)")
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
        encoded = name.encode()
        append(_TOPIC.pack(len(encoded)))
        append(encoded)
        append(_COUNT.pack(len(partitions)))
        for index, result in partitions:
            if version >= 11:
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
