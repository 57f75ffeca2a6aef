"""Reads over a snapshot of one log's segments: Fetch by offset and ListOffsets by timestamp
(the producer-state replay and read_committed reads are ``log_transactions``').

Owns no state of its own. Every
function takes the segment tuple a ``Log`` handed out (immutable, replaced on every change)
together with the offsets read at the same moment, so a roll, a retention deletion or a cleaner
swap on the owner thread never disturbs a read in progress: the files of removed segments stay
readable until ``file.delete.delay.ms`` has passed (``segment_deletion``), and a slice read keeps
its descriptor until it is dropped (``file_records``). Range checks against
``log_start_offset`` stay with the ``Log``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from strata.storage.leader_epoch_cache import LeaderEpochFileCache
from strata.storage.log_results import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NOTHING_TIERED,
    FetchDataInfo,
    TimestampAndOffset,
)
from strata.storage.log_segment import LogSegment


def read_segments(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    start_offset: int,
    max_bytes: int,
    bound: int,
    end: int,
    min_one_message: bool,
) -> FetchDataInfo:
    """Batches from ``start_offset`` (within [log_start_offset, ``end``]) up to, excluding,
    ``bound`` (<= ``end``, the LEO): the first segment that has any, at least one whole batch
    when ``min_one_message`` (KIP-74). ``bases`` are the segments' base offsets."""
    if start_offset >= bound:
        return FetchDataInfo(start_offset, ())
    idx = max(bisect.bisect_right(bases, start_offset) - 1, 0)
    while idx < len(segments):
        segment = segments[idx]
        max_position = None
        if idx + 1 >= len(segments) or bound < bases[idx + 1]:
            found = segment.translate_offset(bound) if bound < end else None
            max_position = found[0] if found is not None else segment.size
        fslice = segment.read(start_offset, max_bytes, max_position, min_one_message)
        if fslice is not None and fslice.length > 0:
            return FetchDataInfo(start_offset, (fslice,))
        if max_position is not None:
            break
        idx += 1
    return FetchDataInfo(start_offset, ())


def offset_by_timestamp(
    segments: Sequence[LogSegment],
    timestamp: int,
    log_start_offset: int,
    log_end_offset: int,
    cache: LeaderEpochFileCache,
) -> TimestampAndOffset | None:
    """ListOffsets: -2 earliest (and -4, earliest local: nothing is tiered), -1 latest (LEO),
    -3 the record with the largest timestamp, -5/-6 (tiered offsets) none, else the first
    offset whose record timestamp is >= ``timestamp`` (None if there is none)."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(-1, log_start_offset, cache.epoch_for_offset(log_start_offset))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(-1, log_end_offset, cache.latest_epoch)
    if timestamp in NOTHING_TIERED:
        return TimestampAndOffset(-1, -1, -1)
    if timestamp == MAX_TIMESTAMP:
        best: LogSegment | None = None
        for seg in segments:
            if seg.size and (best is None or
                             seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        found_max = best.read_max_timestamp_record() if best is not None else None
        if found_max is None:
            return None
        ts, off, epoch = found_max
        return TimestampAndOffset(ts, off, epoch if epoch >= 0 else None)
    for seg in segments:
        if seg.size == 0 or seg.largest_timestamp < timestamp:
            continue
        found = seg.find_offset_by_timestamp(timestamp, log_start_offset)
        if found is not None:
            ts, off = found
            return TimestampAndOffset(ts, off, cache.epoch_for_offset(off))
    return None
