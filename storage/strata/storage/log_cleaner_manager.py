"""Which log to compact next, and how far each is clean (Kafka's ``LogCleanerManager``): the
cleaner checkpoints and the per-partition cleaning state. The driver is ``log_cleaner.LogCleaner``;
the compaction of one log is ``cleaner.Cleaner``.

Each data dir holds a ``cleaner-offset-checkpoint`` (format: ``checkpoints.OffsetCheckpointFile``)
mapping ``(topic, partition)`` to its *first dirty offset*: everything below it has been cleaned
against a complete offset map. A partition missing from it has never been cleaned (dirty from the
log start offset). The manager reads each file once, keeps it cached and writes it through on
every change.

Choosing (``LogCleanerManager.grab_filthiest_compacted_log``), among the online logs whose
``cleanup.policy`` includes ``compact`` and that no cleaner works on, nor is paused or marked
uncleanable:

* ``first_dirty`` = the checkpoint, reset to the log start offset if it is below it (retention or
  DeleteRecords moved the start) or above the log end offset (a truncation);
* ``first_uncleanable`` = the lowest of the high watermark, the active segment's base offset and
  the base of the first dirty segment younger than ``min.compaction.lag.ms`` (by its largest
  timestamp), rounded down to a segment boundary (``cleanable_offsets``);
* ``cleanable_ratio`` = bytes of the segments holding [first_dirty, first_uncleanable) over those
  bytes plus the bytes of the segments below ``first_dirty``;
* a log qualifies if that ratio exceeds ``min.cleanable.dirty.ratio``, or if it has cleanable
  bytes and a dirty segment's first batch is older than ``max.compaction.lag.ms``; the one with the
  highest ratio wins.

Per-partition state (absent = idle), one lock for all of it:

===============  ==========================================================================
in progress      a cleaner works on it; it may swap segments and checkpoint when done
aborted          still in progress, but ``abort_and_pause_cleaning`` was called: the cleaner
                 stops at its next check, swaps nothing more, does not checkpoint, and the
                 partition is then paused
paused (n)       not chosen until ``resume_cleaning`` was called n times
uncleanable      a round failed with an unexpected error; never chosen again (until reset)
===============  ==========================================================================

``abort_and_pause_cleaning`` returns at once: the cleaner's swap takes the same lock and checks
the state first, so once it returns no swap of that partition happens until it is resumed. Lock
order: this manager's lock, then the log's lock. Callers about to truncate or delete a log call
``abort_and_pause_cleaning`` (or ``abort_cleaning``) *before* taking the log's lock.

Threads: thread-safe. The cleaner workers call it to choose, check, swap and finish; the log
manager calls it to pause, resume and abort cleaning and to move or trim checkpoint entries. Time
is injected (``now_ms``); nothing here sleeps or starts a thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.cleaner import (
    CleanableLog,
    LogCleaningAbortedError,
    SwapFunction,
    floor_segment_base,
    swap_if_current,
)
from strata.storage.log_config import LONG_MAX
from strata.storage.log_segment import LogSegment

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class CleanerLog(CleanableLog, Protocol):
    """What the cleaner manager reads of a ``Log`` besides what the ``Cleaner`` needs."""

    @property
    def high_watermark(self) -> int: ...


# ------------------------------------------------------------------ what is cleanable
@dataclass(frozen=True, slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_offset: int
    force_update_checkpoint: bool = False  # the checkpoint was out of the log's range


def _segment_ends(segments: Sequence[LogSegment], log_end_offset: int) -> list[int]:
    return [s.base_offset for s in segments[1:]] + [log_end_offset]


def cleanable_offsets(log: CleanerLog, checkpoint: int | None, now_ms: int) -> OffsetsToClean:
    """The dirty range of ``log`` (module docstring; Kafka's ``cleanableOffsets``)."""
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty, force = (start if checkpoint is None else checkpoint), False
    if first_dirty < start or first_dirty > end:
        if first_dirty > end or not log.config.delete:
            logger.warning("resetting the first dirty offset of %s from %d to the log start "
                           "offset %d: it is outside [%d, %d]", log.dir, first_dirty, start,
                           start, end)
        first_dirty, force = start, True
    segments = log.segments
    active_base = segments[-1].base_offset
    uncleanable = min(log.high_watermark, active_base)
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg, seg_end in zip(segments[:-1], _segment_ends(segments, end), strict=False):
            if seg_end <= first_dirty:
                continue
            if seg.largest_timestamp > now_ms - lag:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    uncleanable = floor_segment_base(segments, uncleanable)
    return OffsetsToClean(first_dirty, max(first_dirty, uncleanable), force)


def max_compaction_delay_ms(log: CleanerLog, first_dirty_offset: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0 if not past):
    judged by the max timestamp of each dirty, inactive segment's first batch."""
    lag = max(log.config.max_compaction_lag_ms, 0)
    if lag >= LONG_MAX:
        return 0
    segments = log.segments
    earliest = LONG_MAX
    for seg, seg_end in zip(segments[:-1], _segment_ends(segments, log.log_end_offset),
                            strict=False):
        if seg_end <= first_dirty_offset:
            continue
        first = next(iter(seg.batches()), None)
        if first is not None and first[1].max_timestamp > 0:
            earliest = min(earliest, first[1].max_timestamp)
    clean_until = now_ms - lag
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log, its dirty range and how dirty it is (Kafka's ``LogToClean``)."""

    topic_partition: TopicPartition
    log: CleanerLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int = 0

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    @classmethod
    def of(cls, tp: TopicPartition, log: CleanerLog, offsets: OffsetsToClean,
           max_delay_ms: int = 0) -> LogToClean:
        segments = log.segments
        clean = cleanable = 0
        for seg, seg_end in zip(segments, _segment_ends(segments, log.log_end_offset),
                                strict=False):
            if seg.base_offset < offsets.first_dirty_offset:
                clean += seg.size
            if (seg.base_offset < offsets.first_uncleanable_offset
                    and seg_end > offsets.first_dirty_offset):
                cleanable += seg.size
        return cls(tp, log, offsets.first_dirty_offset, offsets.first_uncleanable_offset,
                   clean, cleanable, max_delay_ms)


# ------------------------------------------------------------------------------ manager
class LogCleanerManager:
    """Per-partition cleaning state and the cleaner checkpoints (module docstring).

    ``logs`` returns the broker's current logs (``LogManager.all_logs``). Thread-safe.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path],
        logs: Callable[[], Mapping[TopicPartition, CleanerLog]],
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._logs = logs
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self.uncleanable_partitions: set[TopicPartition] = set()
        self._checkpoint_files: dict[Path, OffsetCheckpointFile] = {}
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}

    # ----------------------------------------------------------- checkpoints
    def _checkpoint(self, data_dir: Path) -> dict[TopicPartition, int]:
        """The cached checkpoint of ``data_dir`` (read once); call with the lock held."""
        cached = self._checkpoints.get(data_dir)
        if cached is None:
            file = OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT)
            self._checkpoint_files[data_dir] = file
            cached = self._checkpoints[data_dir] = file.read_or_empty()
        return cached

    def _write_checkpoint(self, data_dir: Path) -> None:
        self._checkpoint_files[data_dir].write(self._checkpoints[data_dir])

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            out: dict[TopicPartition, int] = {}
            for data_dir in self.log_dirs:
                out.update(self._checkpoint(data_dir))
            return out

    def update_checkpoints(
        self,
        data_dir: Path,
        update: tuple[TopicPartition, int] | None = None,
        remove: TopicPartition | None = None,
    ) -> None:
        """Set and/or drop one partition's entry in ``data_dir``'s checkpoint (write-through).
        The log manager removes a deleted partition's entry this way."""
        with self._lock:
            self._update_checkpoints(data_dir, update, remove)

    def _update_checkpoints(
        self,
        data_dir: Path,
        update: tuple[TopicPartition, int] | None,
        remove: TopicPartition | None,
    ) -> None:
        entries = self._checkpoint(data_dir)
        if remove is not None:
            entries.pop(remove, None)
        if update is not None:
            entries[update[0]] = update[1]
        self._write_checkpoint(data_dir)

    def maybe_truncate_checkpoint(self, data_dir: Path, tp: TopicPartition, offset: int) -> None:
        """After a truncation to ``offset``: the first dirty offset may not stay above it."""
        with self._lock:
            current = self._checkpoint(data_dir).get(tp)
            if current is not None and current > offset:
                self._update_checkpoints(data_dir, (tp, offset), None)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path, destination: Path) -> None:
        """The partition moved between data dirs (keeps how far it is clean)."""
        with self._lock:
            offset = self._checkpoint(source).get(tp)
            if offset is not None:
                self._update_checkpoints(source, None, tp)
                self._update_checkpoints(destination, (tp, offset), None)

    # ---------------------------------------------------------------- choose
    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        """Choose the log to clean (module docstring) and mark it in progress; None if none
        qualifies."""
        with self._lock:
            best: LogToClean | None = None
            for tp, log in self._logs().items():
                if (tp in self._in_progress or self._paused.get(tp, 0) > 0
                        or tp in self.uncleanable_partitions or getattr(log, "offline", False)
                        or not log.config.compact):
                    continue
                data_dir = log.dir.parent
                offsets = cleanable_offsets(log, self._checkpoint(data_dir).get(tp), now_ms)
                if offsets.force_update_checkpoint:
                    self._update_checkpoints(data_dir, (tp, offsets.first_dirty_offset), None)
                delay = max_compaction_delay_ms(log, offsets.first_dirty_offset, now_ms)
                candidate = LogToClean.of(tp, log, offsets, delay)
                if candidate.cleanable_bytes <= 0:
                    continue
                if not (candidate.needs_compaction_now or candidate.cleanable_ratio
                        > log.config.min_cleanable_dirty_ratio):
                    continue
                if best is None or (candidate.needs_compaction_now, candidate.cleanable_ratio) > (
                        best.needs_compaction_now, best.cleanable_ratio):
                    best = candidate
            if best is not None:
                self._in_progress.add(best.topic_partition)
            return best

    # -------------------------------------------------------------- lifecycle
    def cleaning_state(self, tp: TopicPartition) -> str | None:
        """``"in progress"``, ``"aborted"``, ``"paused"``, ``"uncleanable"`` or None (idle)."""
        with self._lock:
            if tp in self._aborted:
                return "aborted"
            if tp in self._in_progress:
                return "in progress"
            if self._paused.get(tp, 0) > 0:
                return "paused"
            return "uncleanable" if tp in self.uncleanable_partitions else None

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> bool:
        """Stop any cleaning of ``tp`` and keep it from being chosen until ``resume_cleaning``.

        Returns at once. True if a cleaner was working on it: that round swaps nothing more
        and does not checkpoint. Calls nest (each needs its own resume).
        """
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if tp in self._in_progress:
                self._aborted.add(tp)
                return True
            return False

    def resume_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            count = self._paused.get(tp, 0)
            if count <= 0:
                raise ValueError(f"cleaning of {tp} is not paused")
            if count == 1:
                del self._paused[tp]
            else:
                self._paused[tp] = count - 1

    def abort_cleaning(self, tp: TopicPartition, data_dir: Path | None = None) -> None:
        """The partition is going away: stop its cleaning, forget its pauses, its uncleanable
        mark and (given its data dir) its checkpoint entry."""
        with self._lock:
            if tp in self._in_progress:
                self._aborted.add(tp)
            self._paused.pop(tp, None)
            self.uncleanable_partitions.discard(tp)
            if data_dir is not None:
                self._update_checkpoints(data_dir, None, tp)

    def is_aborted(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._aborted

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Raise ``LogCleaningAbortedError`` if the cleaning of ``tp`` was aborted."""
        if self.is_aborted(tp):
            raise LogCleaningAbortedError(f"cleaning of {tp[0]}-{tp[1]} was aborted")

    def swap_unless_aborted(self, tp: TopicPartition, log: CleanerLog) -> SwapFunction:
        """The cleaner's swap for ``tp``: refused once aborted, atomically with the check."""
        swap = swap_if_current(log)

        def guarded(new: Sequence[LogSegment], old: Sequence[LogSegment]) -> None:
            with self._lock:
                if tp in self._aborted:
                    raise LogCleaningAbortedError(f"cleaning of {tp[0]}-{tp[1]} was aborted")
                swap(new, old)

        return guarded

    def done_cleaning(self, tp: TopicPartition, data_dir: Path, end_offset: int | None) -> None:
        """The round on ``tp`` ended; checkpoint ``end_offset`` unless aborted or None."""
        with self._lock:
            self._in_progress.discard(tp)
            if tp in self._aborted:
                self._aborted.discard(tp)
                return
            if end_offset is not None:
                self._update_checkpoints(data_dir, (tp, end_offset), None)

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self.uncleanable_partitions.add(tp)

    def reset_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self.uncleanable_partitions.discard(tp)
