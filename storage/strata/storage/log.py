"""``Log``: one partition replica's log — an ordered run of segments with offsets and state.

Owns the segment tuple of one ``<topic>-<partition>/`` directory and the offsets that describe
it (Kafka's vocabulary, see GLOSSARY.md):

* ``log_start_offset`` — first offset a reader may fetch; moves up by retention and
  DeleteRecords, never down (except ``truncate_fully_and_start_at``).
* ``log_end_offset`` (LEO) — the offset the next appended record gets.
* ``high_watermark`` (HW) — set by the partition layer (replication); consumers read below it.
  ``log_start_offset <= high_watermark <= log_end_offset`` always holds.
* ``recovery_point`` — everything below it has been fsynced; recovery scans from here.
* ``last_stable_offset`` (LSO) — min(first unstable offset, HW): read_committed consumers read
  below it. The first unstable offset is the first offset of the oldest transaction not yet
  both decided and replicated (``producer_state``); retention never moves the log start offset
  past it (DeleteRecords, as in Kafka, is bounded by the HW only). Transaction rules live in
  ``log_transactions``.

Invariants: segments are sorted by base offset and contiguous in offsets (gaps only where
compaction removed records); only the last segment (the active one) is appended to; the segment
tuple is immutable and replaced on every change, so a reader holding a snapshot is never
disturbed by a roll, a retention deletion or a cleaner swap. Files of removed segments are
scheduled for deletion (``segment_deletion``). Reads work on a snapshot (``log_read``); what a
new segment looks like and when the active one rolls is ``log_roll``.

Threads: appends, reads, rolls, truncation, retention and config changes run on one owner
thread (the broker's event loop). ``flush`` runs in a worker thread: it works on a snapshot of
the segment tuple and only takes ``_flush_lock``, which the owner thread never waits on. The
cleaner (a worker thread) rewrites segments without locks and takes ``lock`` only for the final
swap; every structural change on the owner thread takes ``lock`` too (uncontended otherwise).

Durability: ``append_*`` returns after ``os.write`` handed every byte to the OS, so a killed
process loses nothing acknowledged. ``flush.messages`` / ``flush.ms`` only decide when fsync
runs (what an OS crash may lose); ``needs_flush`` tells the caller when it is due. A disk error
raises ``KafkaStorageError`` (the write is not acknowledged) and takes the log offline; running
out of file descriptors (EMFILE/ENFILE) at a roll or a lazy open fails that append (or read,
or flush) only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from strata.storage import record_batch as rb
from strata.storage.clock import Clock
from strata.storage.errors import (
    KafkaStorageError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
)
from strata.storage.leader_epoch_cache import LeaderEpochFileCache
from strata.storage.log_append import assign_offsets
from strata.storage.log_config import LogConfig
from strata.storage.log_read import offset_by_timestamp, read_segments
from strata.storage.log_results import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from strata.storage.log_retention import (
    below_log_start,
    deletable_prefix,
    retention_bytes_breached,
    retention_ms_breached,
)
from strata.storage.log_roll import out_of_descriptors, roll_params, segment_config
from strata.storage.log_segment import LogSegment
from strata.storage.log_transactions import (
    AppendOrigin,
    FetchIsolation,
    OnCompletedTxn,
    aborted_entry,
    apply_producer_batches,
    check_markers,
    collect_aborted_transactions,
    follower_producer_batches,
    markers_of,
    read_committed,
    replay_producer_state,
)
from strata.storage.log_validator import validate_records, validation_config
from strata.storage.producer_state import CompletedTxn, ProducerStateManager
from strata.storage.records import EndTransactionMarker
from strata.storage.segment_deletion import SegmentDeletion

__all__ = ["Log"]


class Log:
    """A partition log. Build it with ``strata.storage.log_loader.load_log``."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        clock: Clock,
        segments: Sequence[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        on_storage_error: Callable[[Path, BaseException], None] | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self.dir = dir
        self._config = config
        self._validation_config = validation_config(config)
        self._clock = clock
        self._segments: tuple[LogSegment, ...] = tuple(segments)
        self._bases: tuple[int, ...] = tuple(s.base_offset for s in segments)
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self._on_storage_error = on_storage_error
        self._log_end_offset = self._segments[-1].read_next_offset()
        self.log_start_offset = log_start_offset
        self.recovery_point = min(recovery_point, self._log_end_offset)
        self._high_watermark = log_start_offset
        self._deletion = SegmentDeletion()
        self._flush_lock = threading.Lock()
        # Serialises structural changes: the owner thread's appends/rolls/truncation/retention
        # and the cleaner's final swap (from a worker thread). Reads and flush never take it.
        self.lock = threading.RLock()
        self._last_flush_ms = clock.monotonic_ms()
        self.offline = False

    # ----------------------------------------------------------------- state
    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        self._validation_config = validation_config(config)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped into [log_start_offset, log_end_offset]; returns the value set."""
        self._high_watermark = max(self.log_start_offset, min(offset, self._log_end_offset))
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the HW up to ``offset`` (never down); True when it moved."""
        if offset > self._high_watermark:
            before = self._high_watermark
            return self.update_high_watermark(offset) > before
        return False

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction not both decided and replicated, or None."""
        return self.producer_state.first_unstable_offset

    def last_stable_offset(self, high_watermark: int | None = None) -> int:
        """The LSO: min(first unstable offset, ``high_watermark`` (default: the log's HW)).
        ListOffsets latest under read_committed answers it."""
        hw = self._high_watermark if high_watermark is None else high_watermark
        first = self.producer_state.first_unstable_offset
        return hw if first is None or first > hw else first

    def collect_aborted_transactions(self, start_offset: int,
                                     upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [``start_offset``, ``upper_bound_offset``) (``.txnindex`` files)."""
        found = collect_aborted_transactions(self._segments, self._bases, start_offset,
                                             upper_bound_offset)
        return [(t.producer_id, t.first_offset) for t in found]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def needs_flush(self) -> bool:
        """True when ``flush.messages`` or ``flush.ms`` says unflushed data is due for fsync."""
        if self.unflushed_messages <= 0:
            return False
        if self.unflushed_messages >= self._config.flush_messages:
            return True
        return self._clock.monotonic_ms() - self._last_flush_ms >= self._config.flush_ms

    def _check_online(self) -> None:
        if self.offline:
            raise LogDirOfflineError(f"log {self.dir} is offline after a disk error")

    def _storage_failure(self, exc: BaseException) -> None:
        self.offline = True
        if self._on_storage_error is not None:
            self._on_storage_error(self.dir, exc)

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        self._segments = tuple(segments)
        self._bases = tuple(s.base_offset for s in self._segments)

    # ---------------------------------------------------------------- append
    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT, verification_guard: int | None = None,
    ) -> LogAppendInfo:
        """Validate a record set, assign offsets and epoch, append it.

        Raises the validator's errors (Kafka error codes) without touching the log, and the
        producer-state errors for idempotent and transactional batches. A duplicate of one of
        a producer's last five batches is not appended again: the original offsets come back,
        ``duplicate=True``. Transaction markers (control batches) come from the coordinator
        only (``origin=COORDINATOR``); a client's control batch is INVALID_RECORD.
        ``verification_guard``: see ``ProducerStateManager.check`` (None: not verified).
        """
        with self.lock:
            self._check_online()
            now = self._clock.milliseconds()
            coordinator = origin is AppendOrigin.COORDINATOR
            result = validate_records(records, self._validation_config, now,
                                      control_allowed=coordinator)
            batches = result.batches
            markers = markers_of(records, batches, self._log_end_offset) if coordinator else None
            if markers is not None:
                check_markers(self.producer_state, batches, markers, self._log_end_offset)
            for _, header in batches:
                if markers is None and header.producer_id >= 0:
                    dup = self.producer_state.check(header, client=not coordinator,
                                                    verification_guard=verification_guard)
                    if dup is not None:
                        first = dup.last_offset - dup.offset_delta
                        return LogAppendInfo(first, dup.last_offset, dup.timestamp, dup.last_offset,
                                             -1, self.log_start_offset, header.records_count, 0,
                                             duplicate=True)
            first = self._log_end_offset
            assigned = assign_offsets(records, batches, first, leader_epoch,
                                      now if result.log_append_time else None)
            info = LogAppendInfo(first, assigned.last_offset, assigned.max_timestamp,
                                 assigned.offset_of_max_timestamp,
                                 now if result.log_append_time else -1, self.log_start_offset,
                                 result.record_count, assigned.size)
            if leader_epoch >= 0:
                self._assign_epoch(leader_epoch, info.first_offset)
            self._append(assigned.data, assigned.size, assigned.producer_batches,
                         info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                         markers)
            return info

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                             epoch: int) -> int:
        """The guard for a transaction verification (KIP-890), ``SENTINEL_GUARD`` if the
        producer's transaction is already open here."""
        with self.lock:
            return self.producer_state.maybe_start_transaction_verification(
                producer_id, sequence, epoch, self._clock.milliseconds())

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader as they are (offsets and epochs kept).

        Batches must be whole, CRC-valid and start at or after our log end offset.
        """
        with self.lock:
            self._check_online()
            headers = list(rb.iter_headers(records, verify_crc=True))
            if not headers:
                return LogAppendInfo(self._log_end_offset, self._log_end_offset - 1, -1, -1, -1,
                                     self.log_start_offset, 0, 0)
            first = headers[0][1].base_offset
            if first < self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"follower append at {first} is below the log end offset {self._log_end_offset}"
                )
            max_ts, offset_of_max_ts, count = rb.NO_TIMESTAMP, first, 0
            for _, h in headers:
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = h.max_timestamp, h.last_offset
                count += h.records_count
                if h.partition_leader_epoch >= 0:
                    self._assign_epoch(h.partition_leader_epoch, h.base_offset)
            last = headers[-1][1].last_offset
            buf = records
            info = LogAppendInfo(first, last, max_ts, offset_of_max_ts, -1, self.log_start_offset,
                                 count, memoryview(records).nbytes)
            if first > self._log_end_offset:
                # The leader's log starts later than ours ends (e.g. after its retention).
                self.truncate_fully_and_start_at(first)
            producer_batches, markers = follower_producer_batches(records, headers)
            self._append(buf, info.valid_bytes, producer_batches, last, max_ts, offset_of_max_ts,
                         markers)
            return info

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        latest = self.leader_epoch_cache.latest_epoch
        if latest is None or epoch > latest:
            self.leader_epoch_cache.assign(epoch, start_offset)

    def _append(
        self,
        buf: rb.Buffer | Sequence[rb.Buffer],
        size: int,
        producer_batches: Sequence[tuple[rb.BatchHeader, int, int]],
        last_offset: int,
        max_ts: int,
        offset_of_max_ts: int,
        markers: dict[int, EndTransactionMarker] | None = None,
    ) -> None:
        """Write ``buf`` and record ``(header, first offset, last offset)`` of each batch that
        carries a producer id in the producer state; ``markers`` (by offset) are the
        transaction markers among them, whose aborted transactions go to the ``.txnindex``."""
        try:
            segment = self._maybe_roll(size, max_ts, last_offset)
            segment.append(last_offset, max_ts, offset_of_max_ts, buf)
        except KafkaStorageError as exc:
            if not out_of_descriptors(exc):
                self._storage_failure(exc)
            raise
        psm = self.producer_state
        if markers is None:
            for h, first, last in producer_batches:
                psm.update(h, first, last, h.max_timestamp)
        else:
            def on_completed(completed: CompletedTxn) -> None:
                if completed.is_aborted:
                    segment.update_txn_index(aborted_entry(completed))

            try:
                apply_producer_batches(psm, producer_batches, markers, on_completed)
            except KafkaStorageError as exc:  # the .txnindex write failed: a disk error
                self._storage_failure(exc)
                raise
        psm.update_map_end_offset(last_offset + 1)
        self._log_end_offset = last_offset + 1

    def _maybe_roll(self, messages_size: int, max_ts: int, max_offset: int) -> LogSegment:
        active = self.active_segment
        if active.should_roll(roll_params(self._config, messages_size, max_ts, max_offset,
                                          self._clock.milliseconds())):
            return self.roll()
        return active

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self.lock:
            self._check_online()
            active = self.active_segment
            new_base = self._log_end_offset
            if active.size == 0 and active.base_offset == new_base:
                return active
            try:
                active.on_become_inactive_segment()
                segment = LogSegment.open(self.dir, new_base, segment_config(self._config),
                                          now_ms=self._clock.milliseconds())
            except (KafkaStorageError, OSError) as exc:
                if not out_of_descriptors(exc):  # a process limit is no disk failure
                    self._storage_failure(exc)
                raise KafkaStorageError(f"cannot roll {self.dir}: {exc}") from exc
            self._set_segments((*self._segments, segment))
            self.producer_state.take_snapshot(new_base)
            return segment

    # ------------------------------------------------------------------ read
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one_message: bool = True,
        isolation: FetchIsolation | None = None,
    ) -> FetchDataInfo:
        """Read from ``start_offset`` up to (excluding) ``upper_bound`` (default: LEO).

        Consumers pass the high watermark as ``upper_bound``, followers the LEO. Returns at
        least one whole batch when ``min_one_message`` even if it exceeds ``max_bytes``
        (KIP-74). Raises ``OffsetOutOfRangeError`` outside [log_start_offset, LEO].
        ``isolation=TXN_COMMITTED`` (read_committed) also stops at the first unstable offset
        and fills ``aborted_transactions``; any other isolation reads as before.
        """
        self._check_online()
        segments, bases = self._segments, self._bases
        end = self._log_end_offset
        bound = end if upper_bound is None else min(upper_bound, end)
        if start_offset < self.log_start_offset or start_offset > end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {end}] of {self.dir}"
            )
        if isolation is not None and isolation == FetchIsolation.TXN_COMMITTED:  # or broker enum
            first_unstable = self.producer_state.first_unstable_offset
            if first_unstable is not None and first_unstable < bound:
                bound = first_unstable
            return read_committed(segments, bases, start_offset, max_bytes, bound, end,
                                  min_one_message)
        return read_segments(segments, bases, start_offset, max_bytes, bound, end,
                             min_one_message)

    # ------------------------------------------------------- offsets by time
    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest (LEO), -3 max timestamp, else the first offset
        whose record timestamp is >= ``timestamp`` (None if there is none)."""
        return offset_by_timestamp(self._segments, timestamp, self.log_start_offset,
                                   self._log_end_offset, self.leader_epoch_cache)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101): (largest epoch <= ``epoch``, its end offset)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # ------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or above ``offset`` (a follower diverged); True if it did."""
        with self.lock:
            self._check_online()
            if offset < 0:
                raise ValueError(f"cannot truncate to a negative offset {offset}")
            if offset >= self._log_end_offset:
                return False
            if offset < self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            keep = [s for s in self._segments if s.base_offset <= offset]
            drop = [s for s in self._segments if s.base_offset > offset]
            keep[-1].truncate_to(offset)
            self._set_segments(keep)
            self._schedule_deletion(drop)
            self._log_end_offset = keep[-1].read_next_offset()
            self._after_truncation()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart empty at ``offset``."""
        with self.lock:
            self._check_online()
            self._schedule_deletion(self._segments)  # renamed first: the new one may reuse a name
            segment = LogSegment.open(self.dir, offset, segment_config(self._config),
                                      now_ms=self._clock.milliseconds())
            self._set_segments((segment,))
            self._log_end_offset = offset
            self.log_start_offset = offset
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(offset)
            self._after_truncation()

    def _after_truncation(self) -> None:
        end = self._log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self.producer_state.truncate_and_reload(self.log_start_offset, end)
        self.rebuild_producer_state()
        self.recovery_point = min(self.recovery_point, end)
        self._high_watermark = min(self._high_watermark, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def rebuild_producer_state(self, on_completed: OnCompletedTxn | None = None) -> None:
        """Bring the producer state up to the log end (``log_transactions``' replay);
        ``on_completed`` sees each transaction a replayed marker completes."""
        replay_producer_state(self.producer_state, self._segments, self._log_end_offset,
                              on_completed)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= HW); returns it. As in
        Kafka, an open transaction does not hold it back (only retention waits for it)."""
        with self.lock:
            self._check_online()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: above the high watermark "
                    f"{self._high_watermark}"
                )
            self._increment_log_start_offset(offset)
            self._delete_segments_below_log_start()
            return self.log_start_offset

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)

    # ------------------------------------------------------------- retention
    def delete_old_segments(self) -> int:
        """Retention: delete whole segments by ``retention.ms`` / ``retention.bytes`` (policy
        ``delete``) and below the log start offset (rules in ``log_retention``). Returns the
        number of segments deleted."""
        with self.lock:
            deleted = self._delete_segments_below_log_start()
            if not self._config.delete:
                return deleted
            if self._config.retention_ms >= 0:
                deleted += self._delete_segments(
                    retention_ms_breached(self._clock.milliseconds(), self._config.retention_ms))
            if self._config.retention_bytes >= 0:
                deleted += self._delete_segments(
                    retention_bytes_breached(self.size, self._config.retention_bytes))
            return deleted

    def _delete_segments_below_log_start(self) -> int:
        return self._delete_segments(below_log_start(self.log_start_offset))

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        """Delete the prefix ``deletable_prefix`` picks; the active segment is rolled first if
        it must go too."""
        segments = self._segments
        count = deletable_prefix(segments, self.last_stable_offset(), self._log_end_offset,
                                 predicate)
        if count == 0:
            return 0
        doomed = segments[:count]
        if count == len(segments):
            self.roll()
        remaining = self._segments[count:]
        self._set_segments(remaining)
        self._increment_log_start_offset(remaining[0].base_offset)
        self._schedule_deletion(doomed)
        self.producer_state.delete_snapshots_before(remaining[0].base_offset)
        return count

    def _schedule_deletion(self, segments: Sequence[LogSegment]) -> None:
        """Rename to ``.deleted`` now; close and unlink after ``file.delete.delay.ms``."""
        self._deletion.schedule(segments,
                                self._clock.milliseconds() + self._config.file_delete_delay_ms)

    def delete_pending_segments(self, force: bool = False) -> int:
        """Close and unlink ``.deleted`` segments whose delay has passed; returns how many."""
        return self._deletion.delete_due(self._clock.milliseconds(), force)

    # ------------------------------------------------------------ cleaning
    def replace_segments(self, new: Sequence[LogSegment], old: Sequence[LogSegment]) -> None:
        """Swap cleaned segments in for ``old`` (the cleaner's final step, crash-safe)."""
        with self.lock:
            from strata.storage.segment_swap import replace_segments as swap

            old_bases = {s.base_offset for s in old}
            swap(self.dir, list(new), list(old), schedule_deletion=self._schedule_deletion)
            merged = [s for s in self._segments if s.base_offset not in old_bases] + list(new)
            merged.sort(key=lambda s: s.base_offset)
            self._set_segments(merged)

    # ------------------------------------------------------------- flushing
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to_offset`` (default: LEO) and move
        the recovery point there. Blocking: call from a worker thread, never the event loop."""
        target = self._log_end_offset if up_to_offset is None else up_to_offset
        with self._flush_lock:
            if target <= self.recovery_point:
                return
            segments = self._segments
            try:
                for i, seg in enumerate(segments):
                    nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
                    if seg.base_offset >= target:
                        break
                    if nxt is None or nxt > self.recovery_point:
                        seg.flush()
                self.leader_epoch_cache.sync()  # its appended epochs, before the point moves
            except (OSError, KafkaStorageError) as exc:
                if not out_of_descriptors(exc):  # reopening an evicted segment: retried later
                    self._storage_failure(exc)
                raise KafkaStorageError(f"fsync of {self.dir} failed: {exc}") from exc
            self.recovery_point = max(self.recovery_point, target)
            self._last_flush_ms = self._clock.monotonic_ms()

    def close(self) -> None:
        """Snapshot producer state and close every segment (indexes trimmed)."""
        if not self.offline:
            self.producer_state.take_snapshot(self._log_end_offset)
            self.leader_epoch_cache.sync()  # a clean shutdown's loader trusts the file as is
        for seg in self._segments:
            seg.close()
        self.delete_pending_segments(force=True)
