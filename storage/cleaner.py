"""Compaction of one log (Kafka's ``Cleaner``): offset map, batch filter, crash-safe segment swap.

A compacted log (``cleanup.policy`` containing ``compact``) keeps, per key, the record with the
highest offset; older records of the key are removed and the survivors keep their offsets
(consumers see gaps). One cleaning round of one log (``Cleaner.clean``):

1. **Range.** The cleaner checkpoint says where the *dirty* section starts (``first_dirty``);
   everything before it was cleaned already. The round may clean up to ``first_uncleanable``:
   the lowest of the active segment's base offset, the high watermark, the first offset of a
   transaction still open and the first segment younger than ``min.compaction.lag.ms``
   (``log_cleaner.cleanable_offsets``).
2. **Producers.** A header scan of the whole log (``ProducerScan``) finds every aborted
   transaction (producer id, first offset, abort marker offset), each producer's last data batch
   and epoch, and the transactions still open (they lower ``first_uncleanable`` once more).
3. **Offset map.** The dirty section's keyed records, except control batches and aborted
   transactions, go into an ``OffsetMap`` (key digest -> latest offset) bounded by
   ``log.cleaner.dedupe.buffer.size``. If it fills up, the round stops there: ``end_offset =
   map.latest_offset + 1`` is the next checkpoint.
4. **Rewrite.** The segments from the start of the log to ``end_offset`` are grouped so that one
   group's result fits ``segment.bytes``, ``segment.index.bytes`` and 32-bit relative offsets
   (``group_segments_by_size``). Each group is filtered batch by batch (``BatchFilter``,
   ``filter_batch``) into one new segment ``<base>.log.cleaned`` (+ indexes), flushed, and
   swapped in for the group by ``Log.replace_segments`` (which calls ``replace_segments``).

Retention rules (``BatchFilter``, Kafka's):

* a record past the map (``offset > map.latest_offset``) is kept as it is;
* a record without a key is dropped (a compacted topic refuses them on produce);
* a record is kept only if its offset is the latest of its key;
* a tombstone (null value) is kept until its batch's *delete horizon*: the first round that keeps
  it stamps ``now + delete.retention.ms`` into the batch (attribute bit 6 ``hasDeleteHorizonMs``;
  the horizon becomes the ``baseTimestamp``, KIP-534), the first round after the horizon drops
  it. Consumers thus see a tombstone for at least ``delete.retention.ms`` after it was cleaned;
* records of aborted transactions are dropped; a transaction marker goes once no batch of its
  transaction is left, after a delete horizon of its own;
* a batch left without records disappears, except that it stays as an empty batch (header only,
  ``recordsCount`` 0, same ``baseOffset``, ``lastOffsetDelta`` and producer fields) when it is
  the last batch of a producer the log's producer state still knows (idempotence needs its last
  sequence and epoch; until ``producer.id.expiration.ms``) or ends the cleanable range (the log
  keeps its last offset);
* a batch that loses nothing and gains no horizon is copied byte for byte (compression kept);
  a rebuilt batch keeps its codec, timestamp type, leader epoch and producer fields.

As in Kafka, a round runs only when a log has dirty bytes (``log_cleaner``), so an expired
tombstone goes with the next round after its horizon, not at the horizon. A group whose records
all go becomes an empty segment (its base offset kept); the next round merges it into a group.

Swap protocol (``replace_segments``; Kafka's ``LocalLog.replaceSegments``)::

    new <base>.*.cleaned -> <base>.*.swap     commit point: the new .log's rename to .log.swap
    old <base>.*         -> <base>.*.deleted  (unlinked later: readers keep their descriptors)
    new <base>.*.swap    -> <base>.*          final names

``complete_swaps`` runs at load before any segment is opened and finishes whatever a crash
interrupted: it deletes ``.cleaned`` files (a swap that never committed: the old segments are
intact), ``.deleted`` files, and the index ``.swap`` files of an uncommitted segment; for each
``<base>.log.swap`` it deletes every final-named segment file whose base offset lies in
[base, next offset of the swap log) (the old segments not yet renamed), then renames every
``.swap`` file to its final name. After a crash at any point the directory holds either the old
segments or the cleaned one for each offset range, never both and never neither. An index lost
on the way is rebuilt by the loader (a missing index fails its sanity check).

Threads: the cleaner runs on a worker thread. It reads only segments below the active one plus
batch headers up to the log end offset it saw at the start, and writes only its own
``.cleaned`` files. The swap runs under the log's lock (``Log.replace_segments``) after checking
that the old segments are still the log's. Nothing here sleeps or starts threads.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.abstract_index import MAX_RELATIVE_OFFSET
from strata.storage.checkpoints import fsync_dir
from strata.storage.clock import Clock, SystemClock
from strata.storage.errors import CorruptRecordError, KafkaStorageError
from strata.storage.file_records import FileRecords, pread_fully
from strata.storage.log import segment_config
from strata.storage.log_config import LogConfig
from strata.storage.log_segment import LogSegment
from strata.storage.records import (
    ControlRecordType,
    Record,
    build_batch,
    iter_records,
    parse_control_key,
)

logger = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview

# Every suffix a segment's files carry (the cleaner never touches .snapshot files).
SEGMENT_FILE_SUFFIXES = (
    names.LOG_FILE_SUFFIX,
    names.INDEX_FILE_SUFFIX,
    names.TIME_INDEX_FILE_SUFFIX,
)
DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size


class LogCleaningAbortedError(Exception):
    """Cleaning of a log was aborted (truncation, deletion, pause): the round is abandoned."""


# ----------------------------------------------------------------------------- offset map
class OffsetMap:
    """Key -> latest offset over the dirty section (Kafka's ``SkimpyOffsetMap``), bounded.

    Keys are stored as 16-byte BLAKE2b digests, so every entry costs the same whatever the key's
    size: about ``ENTRY_BYTES`` of CPython memory (digest object, int, dict slot; measured 130-160).
    ``capacity = memory * load_factor // ENTRY_BYTES`` entries; ``put`` of a new key beyond it is
    refused. As in Kafka, two keys with the same digest would count as one key (probability
    about n**2 / 2**129 for n keys).

    ``latest_offset`` is the last offset the map covers completely (every keyed record at or
    below it that the cleaner may drop is accounted for); records above it must be kept.
    """

    ENTRY_BYTES = 160

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.capacity = int(memory * load_factor) // self.ENTRY_BYTES
        if self.capacity < 1:
            raise ValueError(f"an offset map of {memory} bytes cannot hold a single key")
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.blake2b(key, digest_size=16).digest()

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest of ``key``; False (nothing stored) when full."""
        digest = self.digest(key)
        if len(self._offsets) >= self.capacity and digest not in self._offsets:
            return False
        self._offsets[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 if the map does not know it."""
        return self._offsets.get(self.digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1


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


# --------------------------------------------------------------------------- transactions
@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction: its producer, first data offset and abort marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A producer's last data batch (its last offset) and epoch (Kafka's ``LastRecord``).

    ``last_data_offset`` is None when the producer's latest entry is a marker of a newer epoch
    (its data batches belong to a fenced epoch); the marker then carries the state to keep.
    """

    last_data_offset: int | None
    producer_epoch: int


def control_type(batch: Buffer, pos: int = 0) -> int | None:
    """The type of the control batch's first record (``ControlRecordType``), None if empty."""
    for record in iter_records(batch, pos, verify_crc=False):
        return parse_control_key(record.key)[1]
    return None


class ProducerScan:
    """Producer facts of a whole log, fed every batch header in offset order.

    ``aborted``: aborted transactions; ``last_records``: per producer id the last data batch and
    epoch (Kafka's ``lastRecordsOfActiveProducers``, without producer expiry);
    ``first_unstable_offset``: first offset of the earliest transaction still open, or None.
    """

    def __init__(self) -> None:
        self.aborted: list[AbortedTxn] = []
        self.last_records: dict[int, LastRecord] = {}
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def on_batch(self, header: rb.BatchHeader, marker: int | None = None) -> None:
        """``marker``: the control type of a control batch (``control_type``)."""
        pid = header.producer_id
        if pid < 0:
            return
        previous = self.last_records.get(pid)
        same_epoch = previous is not None and previous.producer_epoch == header.producer_epoch
        if header.is_control:
            first = self._open.pop(pid, None)
            if marker == ControlRecordType.ABORT and first is not None:
                self.aborted.append(AbortedTxn(pid, first, header.last_offset))
            last_data = previous.last_data_offset if same_epoch and previous else None
            self.last_records[pid] = LastRecord(last_data, header.producer_epoch)
            return
        if header.is_transactional:
            self._open.setdefault(pid, header.base_offset)
        self.last_records[pid] = LastRecord(header.last_offset, header.producer_epoch)

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self._open.values()) if self._open else None


class TransactionTracker:
    """Which batches of aborted transactions to drop and which markers may go (Kafka's
    ``CleanedTransactionMetadata``), fed the batches of one pass in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._aborted: dict[int, list[AbortedTxn]] = {}
        for txn in sorted(aborted, key=lambda t: t.first_offset):
            self._aborted.setdefault(txn.producer_id, []).append(txn)
        self._aborted_seen: set[int] = set()  # producers whose aborted txn still has batches
        self._committed_seen: set[int] = set()  # producers whose open txn still has batches

    def _is_aborted(self, pid: int, offset: int) -> bool:
        return any(t.first_offset <= offset <= t.last_offset for t in self._aborted.get(pid, ()))

    def on_batch_read(self, header: rb.BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction (drop it)."""
        if not header.is_transactional:
            return False
        pid = header.producer_id
        if self._is_aborted(pid, header.base_offset):
            self._aborted_seen.add(pid)
            return True
        self._committed_seen.add(pid)
        return False

    def on_control_batch_read(self, header: rb.BatchHeader, marker: int | None) -> bool:
        """A control batch was read; True if no batch of its transaction is left (it may go)."""
        pid = header.producer_id
        if marker is None:  # already emptied by an earlier round
            return True
        if marker == ControlRecordType.ABORT:
            seen = pid in self._aborted_seen
            self._aborted_seen.discard(pid)
            return not seen
        if marker == ControlRecordType.COMMIT:
            seen = pid in self._committed_seen
            self._committed_seen.discard(pid)
            return not seen
        return False


# ---------------------------------------------------------------------------- batch filter
def delete_horizon_ms(header: rb.BatchHeader) -> int | None:
    """The batch's delete horizon (attribute bit 6 set: its ``baseTimestamp``), else None."""
    if header.attributes & rb.DELETE_HORIZON_FLAG_MASK:
        return header.base_timestamp
    return None


def filter_batch(
    batch: Buffer,
    retain: Callable[[Record], bool],
    *,
    retain_empty: bool = False,
    new_delete_horizon_ms: int | None = None,
) -> bytes | None:
    """The batch with only the records ``retain`` accepts, each at its original offset.

    * Every record kept and nothing to stamp: the original bytes (codec and CRC untouched).
    * Some kept: a rebuilt batch with the same ``baseOffset``, ``lastOffsetDelta``, codec,
      timestamp type, partition leader epoch, producer id/epoch/base sequence and
      transactional/control flags; ``recordsCount`` and ``maxTimestamp`` follow the survivors.
    * None kept: ``None``; with ``retain_empty`` a header-only batch (``recordsCount`` 0,
      uncompressed, ``baseTimestamp = maxTimestamp`` = the original's) that keeps the offsets and
      producer fields (Kafka's ``RETAIN_EMPTY``).

    ``new_delete_horizon_ms``: if the batch has no delete horizon yet and keeps a tombstone (or
    is a control batch), it is rebuilt with this horizon (attribute bit 6). A horizon already
    present is kept.
    """
    header = rb.parse_header(batch)
    kept: list[Record] = []
    dropped = False
    tombstone = False
    for record in iter_records(batch, verify_crc=False):
        if retain(record):
            kept.append(record)
            tombstone = tombstone or record.value is None
        else:
            dropped = True
    horizon = delete_horizon_ms(header)
    stamp = (
        horizon is None
        and new_delete_horizon_ms is not None
        and bool(kept)
        and (tombstone or header.is_control)
    )
    if not dropped and not stamp:
        return bytes(batch[: header.size])
    if not kept:
        if not retain_empty:
            return None
        return build_batch(
            [],
            base_offset=header.base_offset,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            timestamp_type=header.timestamp_type,
            base_timestamp=header.max_timestamp,
            last_offset_delta=header.last_offset_delta,
        )
    return build_batch(
        kept,
        base_offset=header.base_offset,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        timestamp_type=header.timestamp_type,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=new_delete_horizon_ms if stamp else horizon,
    )


class BatchFilter:
    """One round's retention decisions (module docstring), fed the batches in offset order.

    Pure: state is the offset map, the transaction tracker and the round's clock reading.
    ``last_records`` are the producers whose last batch must survive (``ProducerScan``).
    ``upper_bound_offset`` is the round's ``first_uncleanable``: the batch ending there stays.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        delete_retention_ms: int,
        aborted: Iterable[AbortedTxn] = (),
        last_records: Mapping[int, LastRecord] | None = None,
        upper_bound_offset: int = -1,
        stats: CleanerStats | None = None,
    ) -> None:
        self.map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.transactions = TransactionTracker(aborted)
        self.last_records = last_records or {}
        self.upper_bound_offset = upper_bound_offset
        self.stats = stats if stats is not None else CleanerStats()

    def _is_last_batch_of_producer(self, header: rb.BatchHeader) -> bool:
        last = self.last_records.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def should_retain_record(self, header: rb.BatchHeader, record: Record) -> bool:
        """Kafka's ``Cleaner.shouldRetainRecord`` for a data record."""
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages_read += 1
            return False
        if record.offset < self.map.get(record.key):
            return False
        if record.value is not None:
            return True
        horizon = delete_horizon_ms(header)
        return horizon is None or self.now_ms < horizon

    def filter(self, batch: Buffer) -> bytes | None:
        """The batch as it goes into the cleaned segment, or None to drop it."""
        header = rb.parse_header(batch)
        self.stats.messages_read += header.records_count
        self.stats.bytes_read += header.size
        if header.is_control:
            marker = control_type(batch)
            can_discard = self.transactions.on_control_batch_read(header, marker)
            horizon = delete_horizon_ms(header)
            discard_records = can_discard and horizon is not None and horizon <= self.now_ms
        else:
            can_discard = self.transactions.on_batch_read(header)
            discard_records = can_discard
        retain_empty = (
            header.has_producer_id and self._is_last_batch_of_producer(header)
        ) or header.next_offset == self.upper_bound_offset
        if discard_records and not retain_empty:
            return None

        def retain(record: Record) -> bool:
            if discard_records:
                return False
            if header.is_control:
                return True
            return self.should_retain_record(header, record)

        stamp = not header.is_control or can_discard
        out = filter_batch(
            batch,
            retain,
            retain_empty=retain_empty,
            new_delete_horizon_ms=self.now_ms + self.delete_retention_ms if stamp else None,
        )
        if out is not None:
            self.stats.messages_written += rb.parse_header(out).records_count
            self.stats.bytes_written += len(out)
        return out


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
        fd, end = segment.log.fd, segment.size
        pos, buf, buf_start = start_position, b"", start_position
        while pos < end:
            rel = pos - buf_start
            size = rb.peek_size(buf, rel) if rel >= 0 else None
            if size is None or rel + size > len(buf):
                want = max(size or rb.HEADER_SIZE, self.io_buffer_size)
                buf, buf_start, rel = pread_fully(fd, pos, min(want, end - pos)), pos, 0
                size = rb.peek_size(buf, 0)
                if size is None or size > len(buf):
                    if size is not None and size <= end - pos:
                        buf = pread_fully(fd, pos, size)
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
        try:
            for seg in group:
                for _, batch in self.read_batches(seg):
                    check_done()
                    out = batch_filter.filter(batch)
                    if out is not None:
                        header = rb.parse_header(out)
                        cleaned.append(header.last_offset, header.max_timestamp,
                                       header.last_offset, out)
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


# ----------------------------------------------------------------------------------- swap
def replace_segments(
    dir: Path,
    new: Sequence[LogSegment],
    old: Sequence[LogSegment],
    *,
    schedule_deletion: Callable[[Sequence[LogSegment]], None] | None = None,
) -> None:
    """Swap ``new`` (``.cleaned`` segments) in for ``old`` on disk (module docstring).

    ``schedule_deletion`` must rename each old segment's files to ``.deleted`` before it
    returns and unlink them later (``Log._schedule_deletion``: readers keep working until
    ``file.delete.delay.ms``); without it the old segments are renamed and deleted at once.
    The caller (``Log.replace_segments``) holds the log's lock and updates its segment list.
    An OS error raises ``KafkaStorageError``: the log dir must go offline, and the next load
    completes or rolls back the swap (``complete_swaps``).
    """
    new_sorted = sorted(new, key=lambda s: s.base_offset)
    old_sorted = sorted(old, key=lambda s: s.base_offset)
    try:
        for seg in reversed(new_sorted):
            seg.change_file_suffixes(names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)
        fsync_dir(dir)  # the commit point must be durable before any old file is renamed
        if schedule_deletion is not None:
            schedule_deletion(old_sorted)
        else:
            for seg in old_sorted:
                seg.change_file_suffixes("", names.DELETED_FILE_SUFFIX)
        for seg in new_sorted:
            seg.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
        fsync_dir(dir)
    except OSError as exc:
        raise KafkaStorageError(f"swapping cleaned segments into {dir} failed: {exc}") from exc
    if schedule_deletion is None:
        for seg in old_sorted:
            seg.delete()


def _swap_log_next_offset(path: Path, base_offset: int) -> int:
    """Next offset after the last whole batch of a ``.log.swap`` file (its base if none)."""
    records = FileRecords.open(path, create=False)
    next_offset = base_offset
    try:
        for _, header in records.batches():
            next_offset = header.next_offset
    except CorruptRecordError as exc:
        logger.warning("swap file %s ends in a bad batch: %s", path, exc)
    finally:
        records.close()
    return next_offset


def _offset_of(name: str) -> int | None:
    try:
        return names.offset_from_file_name(name)
    except ValueError:
        return None  # not a segment file: never touched


def complete_swaps(dir: Path) -> list[int]:
    """At load, before any segment is opened: finish or roll back an interrupted cleaner swap
    (module docstring). Returns the base offsets of the segments swapped in."""
    swap, cleaned = names.SWAP_FILE_SUFFIX, names.CLEANED_FILE_SUFFIX
    log_swap = names.LOG_FILE_SUFFIX + swap
    files = [p for p in dir.iterdir() if p.is_file() and _offset_of(p.name) is not None]
    present = {p.name for p in files}
    changed = False
    for p in files:
        name = p.name
        if name.endswith(swap) and not name.endswith(log_swap):
            if names.log_file(dir, names.offset_from_file_name(name), cleaned).name in present:
                logger.info("deleting %s: its swap never committed", p)
                p.unlink(missing_ok=True)  # the .log was still .cleaned: roll back
                changed = True
        elif name.endswith((cleaned, names.DELETED_FILE_SUFFIX)):
            p.unlink(missing_ok=True)
            changed = True
    swapped: list[int] = []
    for p in sorted(q for q in files if q.name.endswith(log_swap)):
        base = names.offset_from_file_name(p.name)
        end = max(_swap_log_next_offset(p, base), base + 1)
        for q in files:
            offset = names.offset_from_file_name(q.name)
            if q.name.endswith(SEGMENT_FILE_SUFFIXES) and base <= offset < end:
                logger.info("deleting %s: replaced by the cleaned segment %s", q, p)
                q.unlink(missing_ok=True)
        swapped.append(base)
    for p in sorted(q for q in dir.iterdir() if q.name.endswith(swap)):
        if _offset_of(p.name) is not None:
            logger.info("completing the swap of %s", p)
            os.replace(p, p.with_name(names.replace_suffix(p.name, swap, "")))
            changed = True
    if changed:
        fsync_dir(dir)
    return swapped
