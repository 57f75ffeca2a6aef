"""Segment rolling: what each new segment of a log looks like and when the active one rolls.

Owns the translation of a topic's ``LogConfig`` into the segment's own settings
(``segment.index.bytes``, ``index.interval.bytes``, ``preallocate``: every segment a log, its
loader or the cleaner opens uses ``segment_config``) and into the ``RollParams`` the active
segment weighs before each append (``segment.bytes``; ``segment.ms`` net of
``segment.jitter.ms``; the rules themselves are ``LogSegment.should_roll``). Also decides which
failure of a roll is a disk failure: running out of file descriptors (EMFILE/ENFILE) is a
process limit, so that append fails and the log dir stays online. Pure: no file is touched.
"""

from __future__ import annotations

import errno

from strata.storage.log_config import LogConfig
from strata.storage.log_segment import RollParams, SegmentConfig


def segment_config(config: LogConfig) -> SegmentConfig:
    return SegmentConfig(
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        preallocate=config.preallocate,
    )


def roll_params(config: LogConfig, messages_size: int, max_ts: int, max_offset: int,
                now_ms: int) -> RollParams:
    """What the active segment weighs before appending ``messages_size`` bytes whose largest
    timestamp is ``max_ts`` and last offset ``max_offset``."""
    return RollParams(
        max_segment_bytes=config.segment_bytes,
        max_segment_ms=config.segment_ms - config.segment_jitter_ms,
        max_timestamp_in_messages=max_ts,
        max_offset_in_messages=max_offset,
        messages_size=messages_size,
        now_ms=now_ms,
    )


def out_of_descriptors(exc: BaseException) -> bool:
    """EMFILE/ENFILE (here or as the cause): the append fails, the log dir stays online."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, OSError) and current.errno in (errno.EMFILE, errno.ENFILE):
            return True
        current = current.__cause__
    return False
