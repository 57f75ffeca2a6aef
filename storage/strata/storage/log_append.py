"""Offset assignment for a leader append: the validated record set as the log will store it.

Pure: bytes and headers in, what to write out; no files. Owns the rule that a leader rewrites
only ``baseOffset`` and ``partitionLeaderEpoch`` of each batch, the batch's first 16 bytes
(``baseOffset``, ``batchLength``, ``partitionLeaderEpoch``), which lie outside the CRC. So the
result is, per batch, a fresh 16-byte prefix and a view of the client's bytes after it, written
with one ``os.writev``: the batch is never copied. Only ``LogAppendTime`` changes bytes the CRC
covers (attributes and maxTimestamp); then the record set is copied once and the CRC recomputed.

Invariants of ``AssignedBatches``: offsets are dense from ``first_offset``; ``data`` holds
exactly ``size`` bytes of whole batches; ``max_timestamp`` is the largest batch maxTimestamp (the
append time under LogAppendTime) and ``offset_of_max_timestamp`` the last offset of the first
batch that has it (Kafka's rule for v2 batches).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from strata.storage import record_batch as rb

# baseOffset, batchLength, partitionLeaderEpoch: the first 16 bytes of a batch.
_PREFIX = struct.Struct(">qii")


class AssignedBatches(NamedTuple):
    data: bytearray | list[bytes | memoryview]  # what to write: one buffer or writev chunks
    size: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    producer_batches: list[tuple[rb.BatchHeader, int, int]]  # (header, first, last) with a pid


def assign_offsets(
    records: rb.Buffer,
    batches: Sequence[tuple[int, rb.BatchHeader]],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int | None,
) -> AssignedBatches:
    """Give the validated ``batches`` (position, header) of ``records`` offsets from
    ``first_offset`` and ``leader_epoch``; ``log_append_time`` set means LogAppendTime."""
    view = memoryview(records)
    buf = bytearray(view) if log_append_time is not None else None
    chunks: list[bytes | memoryview] = []
    offset = first_offset
    max_ts, offset_of_max_ts = rb.NO_TIMESTAMP, first_offset
    producer_batches: list[tuple[rb.BatchHeader, int, int]] = []
    for pos, header in batches:
        last = offset + header.last_offset_delta
        if buf is not None and log_append_time is not None:
            rb.set_base_offset(buf, pos, offset)
            rb.set_partition_leader_epoch(buf, pos, leader_epoch)
            rb.set_log_append_time(buf, pos, log_append_time)
            batch_max = log_append_time
        else:
            chunks.append(_PREFIX.pack(offset, header.batch_length, leader_epoch))
            chunks.append(view[pos + _PREFIX.size : pos + header.batch_length + rb.LOG_OVERHEAD])
            batch_max = header.max_timestamp
        if header.producer_id >= 0:
            producer_batches.append((header, offset, last))
        if batch_max > max_ts:
            max_ts, offset_of_max_ts = batch_max, last
        offset = last + 1
    data: bytearray | list[bytes | memoryview] = buf if buf is not None else chunks
    return AssignedBatches(data, view.nbytes, offset - 1, max_ts, offset_of_max_ts,
                           producer_batches)
