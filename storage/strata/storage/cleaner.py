"""Compaction of one log (Kafka's ``Cleaner``): one cleaning round, from the dirty range to the
cleaned segments swapped in.

A compacted log (``cleanup.policy`` containing ``compact``) keeps, per key, the record with the
highest offset; older records of the key are removed and the survivors keep their offsets
(consumers see gaps). One cleaning round of one log (``Cleaner.clean``):

1. **Range.** The cleaner checkpoint says where the *dirty* section starts (``first_dirty``);
   everything before it was cleaned already. The round may clean up to ``first_uncleanable``:
   the lowest of the active segment's base offset, the high watermark, the first offset of a
   transaction still open and the first segment younger than ``min.compaction.lag.ms``
   (``log_cleaner_manager.cleanable_offsets``).
2. **Producers.** A header scan of the whole log (``transaction_scan.ProducerScan``) finds every
   aborted transaction (producer id, first offset, abort marker offset), each producer's last data
   batch and epoch, and the transactions still open (they lower ``first_uncleanable`` once more).
3. **Offset map.** The dirty section's keyed records, except control batches and aborted
   transactions, go into an ``offset_map.OffsetMap`` (key digest -> latest offset) bounded by
   ``log.cleaner.dedupe.buffer.size``. If it fills up, the round stops there: ``end_offset =
   map.latest_offset + 1`` is the next checkpoint.
4. **Rewrite.** The segments from the start of the log to ``end_offset`` are grouped so that one
   group's result fits ``segment.bytes``, ``segment.index.bytes`` and 32-bit relative offsets
   (``group_segments_by_size``). Each group is filtered batch by batch (``batch_filter``: the
   retention rules) into one new segment ``<base>.log.cleaned`` (+ indexes), flushed, and swapped
   in for the group by ``Log.replace_segments`` (crash-safe: ``segment_swap``). The ``.txnindex``
   entry of each ABORT marker kept is copied into the new segment (Kafka's cleaned index); the
   entry of a marker that goes goes with it.

As in Kafka, a round runs only when a log has dirty bytes (``log_cleaner_manager``), so an expired
tombstone goes with the next round after its horizon, not at the horizon. A group whose records
all go becomes an empty segment (its base offset kept); the next round merges it into a group.
A group already swapped in stays swapped in when a later group fails or the round is aborted.

Threads: the cleaner runs on a worker thread. It reads only segments below the active one plus
batch headers up to the log end offset it saw at the start, and writes only its own
``.cleaned`` files. The swap runs under the log's lock (``swap_if_current``) after checking
that the old segments are still the log's. Nothing here sleeps or starts threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.abstract_index import MAX_RELATIVE_OFFSET
from strata.storage.batch_filter import BatchFilter
from strata.storage.clock import Clock, SystemClock
from strata.storage.errors import CorruptRecordError, KafkaStorageError
from strata.storage.log_config import LogConfig
from strata.storage.log_roll import segment_config
from strata.storage.log_segment import LogSegment
from strata.storage.offset_map import OffsetMap
from strata.storage.records import iter_records
from strata.storage.segment_swap import SEGMENT_FILE_SUFFIXES
from strata.storage.transaction_scan import (
    AbortedTxn,
    LastRecord,
    ProducerScan,
    TransactionTracker,
    control_type,
)

logger = logging.getLogger(__name__)

DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size


class LogCleaningAbortedError(Exception):
    """Cleaning of a log was aborted (truncation, deletion, pause): the round is abandoned."""


# ---------------------------------------------------------------------------------- stats
@dataclass(slots=True)
class CleanerStats:
    """What one round did. Times are monotonic ms (``Clock.monotonic_ms``)."""

    start_ms: float = 0.0
    map_complete_ms: float = 0.0
    end_ms: float = 0.0
    first_dirty_offset: int = 0
    end_offset: int = 0  # first offset not cleaned: the next cleaner checkpoint
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    segments_replaced: int = 0
    buffer_utilization: float = 0.0

    @property
    def records_removed(self) -> int:
        return self.messages_read - self.messages_written

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    @property
    def map_duration_ms(self) -> float:
        return self.map_complete_ms - self.start_ms


# -------------------------------------------------------------------------------- the log
class CleanableLog(Protocol):
    """What the cleaner needs of a ``Log`` (``strata.storage.log.Log`` satisfies it)."""

    @property
    def dir(self) -> Path: ...

    @property
    def lock(self) -> AbstractContextManager[object, bool | None]:
        """Serialises the swap with the owner thread's structural changes."""
        ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def config(self) -> LogConfig: ...

    @property
    def segments(self) -> tuple[LogSegment, ...]: ...

    @property
    def log_end_offset(self) -> int: ...

    def replace_segments(self, new: Sequence[LogSegment], old: Sequence[LogSegment]) -> None: ...


# ------------------------------------------------------------------------------- grouping
def group_segments_by_size(
    segments: Sequence[LogSegment],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[LogSegment]]:
    """Consecutive segments grouped so that each group's cleaned result fits one segment.

    A group's total ``.log`` bytes stay within ``segment.bytes`` and each index kind's total
    within ``segment.index.bytes``, and the group's offsets stay within a 32-bit distance of its
    base (relative offsets in the indexes); a segment's last offset is estimated by the next
    segment's base (or ``first_uncleanable_offset``) - 1, Kafka's cheap bound. Empty segments
    skip the offset check.
    """
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.size_in_bytes
        time_index_size = first.time_index.size_in_bytes
        i += 1
        while i < len(segments):
            seg = segments[i]
            bound = segments[i + 1].base_offset if i + 1 < len(segments) else (
                first_uncleanable_offset
            )
            if (
                log_size + seg.size > max_size
                or index_size + seg.offset_index.size_in_bytes > max_index_size
                or time_index_size + seg.time_index.size_in_bytes > max_index_size
                or (seg.size > 0 and bound - 1 - first.base_offset > MAX_RELATIVE_OFFSET)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_in_bytes
            time_index_size += seg.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


# ------------------------------------------------------------------------------- cleaning
SwapFunction = Callable[[Sequence[LogSegment], Sequence[LogSegment]], None]


def _not_aborted() -> None:
    return None


def swap_if_current(log: CleanableLog) -> SwapFunction:
    """The default swap: under the log's lock, refuse (``LogCleaningAbortedError``) if any old
    segment is no longer the log's (retention, truncation or DeleteRecords got there first),
    else ``log.replace_segments``."""

    def swap(new: Sequence[LogSegment], old: Sequence[LogSegment]) -> None:
        with log.lock:
            current = {id(s) for s in log.segments}
            if any(id(s) not in current for s in old):
                raise LogCleaningAbortedError(f"segments of {log.dir} changed while cleaning")
            log.replace_segments(new, old)

    return swap


def floor_segment_base(segments: Sequence[LogSegment], offset: int) -> int:
    """``offset`` rounded down to the base offset of the segment holding it (Kafka cleans and
    measures dirtiness in whole segments); ``offset`` itself below the first segment."""
    floor = offset
    for seg in segments:
        if seg.base_offset > offset:
            break
        floor = seg.base_offset
    return floor


class Cleaner:
    """Cleans one log per ``clean`` call (Kafka's ``Cleaner``); reuses one ``OffsetMap``.

    ``clock`` only measures durations (``CleanerStats``); decisions use ``now_ms``.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        clock: Clock | None = None,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
    ) -> None:
        self.offset_map = offset_map
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.io_buffer_size = io_buffer_size

    def clean(
        self,
        log: CleanableLog,
        first_dirty_offset: int,
        first_uncleanable_offset: int,
        now_ms: int,
        *,
        check_done: Callable[[], None] = _not_aborted,
        swap: SwapFunction | None = None,
    ) -> CleanerStats:
        """One round over ``log`` (module docstring); returns its stats, ``end_offset`` being
        the next checkpoint. ``check_done`` raises ``LogCleaningAbortedError`` to stop early;
        ``swap`` replaces ``swap_if_current(log)``. A group already swapped in stays swapped.
        """
        stats = CleanerStats(start_ms=self.clock.monotonic_ms(),
                             first_dirty_offset=first_dirty_offset,
                             end_offset=first_dirty_offset)
        segments = log.segments
        config = log.config
        scan = self.scan_producers(segments, log.log_end_offset, check_done)
        upper = first_uncleanable_offset
        if scan.first_unstable_offset is not None:
            upper = min(upper, scan.first_unstable_offset)
        upper = max(floor_segment_base(segments, min(upper, segments[-1].base_offset)),
                    first_dirty_offset)
        self.build_offset_map(segments, first_dirty_offset, upper, scan.aborted, stats,
                              check_done)
        stats.map_complete_ms = self.clock.monotonic_ms()
        if self.offset_map.latest_offset < first_dirty_offset:
            if self.offset_map.size:
                raise ValueError(
                    f"log.cleaner.dedupe.buffer.size holds {self.offset_map.capacity} keys, "
                    f"fewer than one batch of {log.dir} at offset {first_dirty_offset}"
                )
            stats.end_ms = self.clock.monotonic_ms()
            return stats  # nothing dirty to clean
        end_offset = self.offset_map.latest_offset + 1
        stats.end_offset = end_offset
        batch_filter = BatchFilter(
            self.offset_map,
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
            aborted=scan.aborted,
            last_records=self._last_records_of_active_producers(log, scan),
            upper_bound_offset=upper,
            stats=stats,
        )
        to_clean = [s for s in segments[:-1] if s.base_offset < end_offset]
        do_swap = swap if swap is not None else swap_if_current(log)
        for group in group_segments_by_size(to_clean, config.segment_bytes,
                                            config.segment_index_bytes, upper):
            self.clean_segments(log, group, batch_filter, now_ms, check_done, do_swap)
            stats.segments_replaced += len(group)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_ms = self.clock.monotonic_ms()
        return stats

    # ---------------------------------------------------------------- passes
    def read_batches(
        self, segment: LogSegment, start_position: int = 0
    ) -> Iterator[tuple[rb.BatchHeader, bytes]]:
        """Every batch of ``segment`` from ``start_position``, CRC-checked, read in chunks of
        ``io_buffer_size`` (a larger batch is read whole)."""
        log, end = segment.log, segment.size
        pos, buf, buf_start = start_position, b"", start_position
        while pos < end:
            rel = pos - buf_start
            size = rb.peek_size(buf, rel) if rel >= 0 else None
            if size is None or rel + size > len(buf):
                want = max(size or rb.HEADER_SIZE, self.io_buffer_size)
                # Each read borrows the descriptor (the pool may close it between reads).
                buf, buf_start, rel = log.read(pos, min(want, end - pos)), pos, 0
                size = rb.peek_size(buf, 0)
                if size is None or size > len(buf):
                    if size is not None and size <= end - pos:
                        buf = log.read(pos, size)
                    if size is None or size > len(buf):
                        raise CorruptRecordError(
                            f"{segment.log.path} ends inside the batch at position {pos}")
            batch = buf[rel : rel + size]
            header = rb.parse_and_verify(batch)
            yield header, batch
            pos += size

    def scan_producers(
        self,
        segments: Sequence[LogSegment],
        log_end_offset: int,
        check_done: Callable[[], None] = _not_aborted,
    ) -> ProducerScan:
        """Header scan of the whole log below ``log_end_offset`` (control batches are read to
        learn their marker type)."""
        scan = ProducerScan()
        for seg in segments:
            if seg.base_offset >= log_end_offset:
                break
            check_done()
            for pos, header in seg.batches():
                if header.base_offset >= log_end_offset:
                    break
                marker = None
                if header.is_control and header.has_producer_id:
                    marker = control_type(seg.log.read(pos, header.size))
                scan.on_batch(header, marker)
        return scan

    def build_offset_map(
        self,
        segments: Sequence[LogSegment],
        start: int,
        end: int,
        aborted: Sequence[AbortedTxn],
        stats: CleanerStats,
        check_done: Callable[[], None] = _not_aborted,
    ) -> None:
        """Map every key of [``start``, ``end``) (whole segments; ``end`` a segment base) to
        its latest offset, skipping control batches and aborted transactions. Stops at the
        first record that does not fit; ``latest_offset`` then ends at the last whole batch."""
        offset_map = self.offset_map
        offset_map.clear()
        tracker = TransactionTracker(t for t in aborted if t.last_offset >= start)
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if seg.base_offset >= end:
                break
            if next_base is not None and next_base <= start:
                continue
            position = 0
            if seg.base_offset < start:
                found = seg.translate_offset(start)
                if found is None:
                    continue
                position = found[0]
            for header, batch in self.read_batches(seg, position):
                check_done()
                stats.map_bytes_read += header.size
                if header.is_control or tracker.on_batch_read(header):
                    stats.map_messages_read += header.records_count
                else:
                    for record in iter_records(batch, verify_crc=False):
                        if (record.key is not None and record.offset >= start
                                and not offset_map.put(record.key, record.offset)):
                            return
                        stats.map_messages_read += 1
                if header.last_offset >= start:
                    offset_map.update_latest_offset(header.last_offset)

    def clean_segments(
        self,
        log: CleanableLog,
        group: Sequence[LogSegment],
        batch_filter: BatchFilter,
        now_ms: int,
        check_done: Callable[[], None],
        swap: SwapFunction,
    ) -> LogSegment:
        """Filter ``group`` into one ``.cleaned`` segment, flush it and swap it in."""
        base = group[0].base_offset
        for suffix in SEGMENT_FILE_SUFFIXES:  # leftovers of an abandoned round
            (log.dir / (names.filename_prefix_from_offset(base) + suffix
                        + names.CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment.open(log.dir, base, segment_config(log.config), now_ms=now_ms,
                                  file_suffix=names.CLEANED_FILE_SUFFIX)
        # An aborted transaction stays in the .txnindex while its ABORT marker survives: a
        # consumer that met its data without the marker would skip the producer's later data.
        aborted = {t.last_offset: t for seg in group for t in seg.txn_index.all_aborted_txns()}
        try:
            for seg in group:
                for _, batch in self.read_batches(seg):
                    check_done()
                    out = batch_filter.filter(batch)
                    if out is not None:
                        header = rb.parse_header(out)
                        cleaned.append(header.last_offset, header.max_timestamp,
                                       header.last_offset, out)
                        txn = aborted.get(header.base_offset) if header.is_control else None
                        if txn is not None and header.records_count > 0:
                            cleaned.update_txn_index(txn)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            modified_ns = group[-1].last_modified * 1_000_000
            os.utime(cleaned.log.path, ns=(modified_ns, modified_ns))
            check_done()
            logger.info("swapping cleaned segment %s in for %d segment(s) of %s",
                        cleaned, len(group), log.dir)
            swap([cleaned], group)
        except LogCleaningAbortedError:
            cleaned.delete()
            raise
        except KafkaStorageError:
            raise  # the swap may be half done: complete_swaps finishes it at the next load
        except Exception:
            if cleaned.log.path.name.endswith(names.CLEANED_FILE_SUFFIX):
                cleaned.delete()
            raise
        return cleaned

    @staticmethod
    def _last_records_of_active_producers(
        log: CleanableLog, scan: ProducerScan
    ) -> Mapping[int, LastRecord]:
        """The scan's producers, minus those the log's producer state has expired."""
        state = getattr(log, "producer_state", None)
        active = getattr(state, "active_producers", None)
        if active is None:
            return scan.last_records
        with log.lock:  # the owner thread mutates producer state under it
            alive = set(active)
        return {pid: last for pid, last in scan.last_records.items() if pid in alive}
