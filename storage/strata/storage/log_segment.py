"""One segment of a partition log: ``<base>.log`` + ``.index`` + ``.timeindex`` + ``.txnindex``.

Kafka's ``LogSegment``. The ``.log`` (``FileRecords``) holds whole RecordBatch v2 batches whose
offsets start at ``base_offset`` (the number in the file names) and strictly increase; every
offset fits a 4-byte relative offset (``offset - base_offset <= 2**31 - 1``). The two indexes
are sparse caches of the ``.log`` (see ``offset_index``/``time_index`` for the byte formats).

Indexing rule (Kafka's): ``append`` of a record set at byte ``position`` first checks whether
*more than* ``index_interval_bytes`` were appended since the last index entry; if so it adds the
offset index entry ``(largest offset of this append, position)`` and a time index entry
``(max timestamp so far, its offset)``. So an index entry points at the start of an append and
is keyed by that append's last offset; a lookup then scans batch headers forward from there.

Truncation rule: ``truncate_to(offset)`` removes the batch *containing* ``offset`` and all later
ones - it keeps exactly the batches whose last offset is < ``offset`` (Kafka's rule). For an
``offset`` at a batch boundary (a batch's base offset, or the next offset after the last batch)
that is "keep batches whose base offset < offset", and the segment's next offset becomes
``offset``. For an ``offset`` inside a batch the next offset becomes that batch's base offset
(never more than ``offset``: nothing at or above it survives).

Crash policy: ``append`` returns once the bytes reached the OS; nothing is fsynced until
``flush``. After an unclean shutdown ``recover`` scans the ``.log`` (framing, offsets, CRC),
truncates it at the first invalid batch and rebuilds both indexes. After a clean shutdown the
loader only runs ``check_tail`` on the last segment (its batches from the last offset index
entry, CRC included, must end exactly at the end of the file) and ``recover``s it if that
fails: the disk may have changed since the clean shutdown. An index file that is
missing while its ``.log`` has data, or whose last entry points past the ``.log``, is marked
corrupt on open so its ``sanity_check`` fails and the loader rebuilds it. Both checks are
``segment_integrity``'s.

Transactions: ``update_txn_index`` records an aborted transaction whose ABORT marker this
segment holds in its ``.txnindex`` (``transaction_index``); ``recover`` empties that index and the
loader's producer-state replay writes it again; ``truncate_to`` drops the entries of the markers
it removes.

Descriptors: the indexes keep none (``file_mapping``); only the active segment owns its
``.log``'s descriptor. An inactive segment (loaded with ``lazy``, or rolled) borrows one from the
bounded pool of ``descriptor_pool`` when read, so a partition costs one descriptor at rest
(``file_records`` says why an eviction never closes a descriptor under a slice).

Lifecycle: the active segment is appended to; ``on_become_inactive_segment`` (roll) writes the
final time index entry and trims all three files; ``close`` does the same plus fsync;
``change_file_suffixes`` renames (``.deleted``, ``.cleaned``, ``.swap``); ``delete`` unlinks.
Threads: everything but ``flush`` runs on the log's owner thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage import segment_integrity
from strata.storage.abstract_index import DEFAULT_MAX_INDEX_SIZE
from strata.storage.errors import CorruptRecordError, StorageError
from strata.storage.file_records import FileRecords, FileSlice
from strata.storage.offset_index import OffsetIndex
from strata.storage.record_batch import BatchHeader, Buffer
from strata.storage.time_index import TimeIndex, TimestampOffset
from strata.storage.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

logger = logging.getLogger(__name__)


class LogSegmentOffsetOverflowError(StorageError):
    """An append or a recovered batch whose offset does not fit the segment's 4-byte relative
    offsets (the log must roll first)."""


@dataclass(frozen=True, slots=True)
class SegmentConfig:
    """Per-segment settings (``index.interval.bytes``, ``segment.index.bytes``, ``preallocate``).

    ``init_file_size``: bytes a *new* ``.log`` is preallocated to when ``preallocate`` (Kafka
    uses ``segment.bytes``); 0 disables preallocation.
    """

    index_interval_bytes: int = 4096
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    preallocate: bool = False
    init_file_size: int = 0


@dataclass(frozen=True, slots=True)
class RollParams:
    """What ``should_roll`` weighs for the next append (``max_segment_ms`` net of jitter)."""

    max_segment_bytes: int
    max_segment_ms: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now_ms: int


class LogSegment:
    """A segment's three files and the in-memory state derived from them."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int,
        created_ms: int,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index if txn_index is not None else TransactionIndex(
            base_offset, names.txn_index_file(log.path.parent, base_offset))
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self._bytes_since_last_index_entry = 0
        # Max timestamp of the first batch (time-based rolling); None = not loaded yet.
        self._rolling_based_timestamp: int | None = None
        # (max timestamp, offset of the batch holding it); None = load from the time index.
        self._max_timestamp_and_offset: TimestampOffset | None = None

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        config: SegmentConfig,
        *,
        now_ms: int,
        file_already_exists: bool = False,
        file_suffix: str = "",
        lazy: bool = False,
    ) -> LogSegment:
        """Open the segment's files in ``dir`` (created unless ``file_already_exists``).

        ``lazy`` (an existing inactive segment at load): the ``.log`` descriptor is opened on
        first use only (the mapped indexes hold none), so a hosted partition costs one
        descriptor, its active segment's ``.log``, until older segments are read."""
        log = FileRecords.open(
            names.log_file(dir, base_offset, file_suffix),
            create=not file_already_exists,
            preallocate_size=config.init_file_size if config.preallocate else 0,
            lazy=lazy and file_already_exists,
        )
        try:
            index_path = names.offset_index_file(dir, base_offset, file_suffix)
            time_index_path = names.time_index_file(dir, base_offset, file_suffix)
            index_existed, time_index_existed = index_path.exists(), time_index_path.exists()
            offset_index = OffsetIndex(index_path, base_offset, config.max_index_size)
            try:
                time_index = TimeIndex(time_index_path, base_offset, config.max_index_size)
            except BaseException:
                offset_index.close()
                raise
        except BaseException:
            log.close()
            raise
        txn_index = TransactionIndex(base_offset,
                                     names.txn_index_file(dir, base_offset, file_suffix))
        segment = cls(log, offset_index, time_index, base_offset, config.index_interval_bytes,
                      now_ms, txn_index)
        if file_already_exists:
            segment_integrity.check_indexes_against_log(log, offset_index, time_index,
                                                        index_existed, time_index_existed)
        return segment

    # ------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        """Bytes in the ``.log``."""
        return self.log.size_in_bytes

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp in the segment (-1 if none is known)."""
        return self._max_timestamp_and_offset_so_far().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """Last offset of the first batch holding ``max_timestamp_so_far``."""
        return self._max_timestamp_and_offset_so_far().offset

    @property
    def largest_timestamp(self) -> int:
        """For time-based retention: ``max_timestamp_so_far``, else the file's mtime (ms)."""
        max_timestamp = self.max_timestamp_so_far
        return max_timestamp if max_timestamp >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        """The ``.log``'s modification time in ms."""
        return self.log.last_modified

    def _max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            # The last time index entry: exact after a roll or close (both write it).
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    # ---------------------------------------------------------------- append
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: Buffer | Sequence[Buffer],
    ) -> None:
        """Append whole, offset-assigned batches ``records`` (one buffer, or several that
        together make whole batches) whose last offset is ``largest_offset``; adds index
        entries per the indexing rule (module docstring).

        Raises ``LogSegmentOffsetOverflowError`` if ``largest_offset`` does not fit the
        segment, ``KafkaStorageError`` on a disk error (then nothing was appended).
        """
        if isinstance(records, (bytes, bytearray)):
            size = len(records)
        elif isinstance(records, memoryview):
            size = records.nbytes
        else:
            size = sum(memoryview(r).nbytes for r in records)
        if size == 0:
            return
        if not self.offset_index.can_append_offset(largest_offset):
            raise LogSegmentOffsetOverflowError(
                f"offset {largest_offset} does not fit segment {self.log.path} with base offset "
                f"{self.base_offset}"
            )
        physical_position = self.log.size_in_bytes
        self.log.append(records)
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if largest_timestamp > self.max_timestamp_so_far:
            self._max_timestamp_and_offset = TimestampOffset(largest_timestamp,
                                                             offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(self.max_timestamp_so_far,
                                         self.offset_of_max_timestamp_so_far)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def update_txn_index(self, aborted: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker was appended to this segment."""
        self.txn_index.append(aborted)

    # ------------------------------------------------------------------ read
    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> TxnIndexSearchResult:
        """This segment's aborted transactions overlapping [fetch, upper bound) (Kafka's)."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def translate_offset(
        self, offset: int, starting_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch with last offset >= ``offset`` (the batch
        holding it, or the next one after a gap), at or after ``starting_position``; None if
        the segment ends before ``offset``."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_from_position(
            offset, max(mapping.position, starting_position))

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FileSlice | None:
        """A slice from the batch holding ``start_offset``; None if the segment ends before it.

        Length: ``min(max_position - start position, max_size)``, with ``max_position``
        defaulting to the segment size. With ``min_one_message`` (KIP-74) ``max_size`` is
        raised to the first batch's size, so that batch is returned whole. May end inside a
        later batch (the client discards the partial batch), like Kafka; when even the first
        batch does not fit (``max_size`` below its size without ``min_one_message``) the slice
        is empty, as Kafka's ``readFromLog`` answers Fetch v3+ (``firstEntryIncomplete``):
        a partition holding only part of a batch makes consumers fail ("no complete records").
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read of {self.log.path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_position, header = found
        adjusted_max_size = max(max_size, header.size) if min_one_message else max_size
        if adjusted_max_size < header.size:
            return self.log.slice(start_position, 0)
        limit = self.size if max_position is None else max_position
        fetch_size = max(min(limit - start_position, adjusted_max_size), 0)
        return self.log.slice(start_position, fetch_size)

    def read_next_offset(self) -> int:
        """The offset after the last batch (scans from the last index entry), or
        ``base_offset`` for an empty segment."""
        position = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self.base_offset
        for _, header in self.log.batches(position):
            next_offset = header.next_offset
        return next_offset

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of every batch from ``start_position`` (no CRC check)."""
        return self.log.batches(start_position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record with timestamp >= ``timestamp`` and
        offset >= ``starting_offset``, or None. The time index gives where to start, the
        offset index the position, then batch headers are scanned and the first qualifying
        batch's records iterated."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def read_max_timestamp_record(self) -> tuple[int, int, int] | None:
        """``(timestamp, offset, partition leader epoch)`` of the first record holding
        ``max_timestamp_so_far`` (ListOffsets -3, KIP-734), or None if the segment has none.
        ``offset_of_max_timestamp_so_far`` is a batch's last offset: the offset index finds
        that batch and its records are searched for the timestamp."""
        if self.size == 0:
            return None
        position = self.offset_index.lookup(self.offset_of_max_timestamp_so_far).position
        return self.log.find_record_with_timestamp(self.max_timestamp_so_far, position)

    # --------------------------------------------------------------- recover
    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Rebuild both indexes from a CRC-checked scan; returns the bytes truncated. The
        ``.txnindex`` is emptied: the loader's producer-state replay writes it again.

        The ``.log`` is truncated at the first batch that is truncated, badly framed, fails
        its CRC, does not strictly follow the previous batch's offsets, or overflows the
        segment's relative offsets. ``on_batch`` sees each valid batch header in order.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_timestamp_and_offset = TimestampOffset(-1, self.base_offset)
        valid_bytes = last_index_entry = 0
        previous_last_offset = self.base_offset - 1
        try:
            for position, header in self.log.batches(verify_crc=True):
                if header.base_offset <= previous_last_offset:
                    raise CorruptRecordError(
                        f"batch at position {position} has base offset {header.base_offset}, "
                        f"not above the previous last offset {previous_last_offset}")
                if not self.offset_index.can_append_offset(header.last_offset):
                    raise CorruptRecordError(
                        f"batch at position {position} has last offset {header.last_offset}, "
                        f"out of range for base offset {self.base_offset}")
                if header.max_timestamp > self.max_timestamp_so_far:
                    self._max_timestamp_and_offset = TimestampOffset(header.max_timestamp,
                                                                     header.last_offset)
                if (valid_bytes - last_index_entry > self.index_interval_bytes
                        and not self.offset_index.is_full() and not self.time_index.is_full()):
                    self.offset_index.append(header.last_offset, valid_bytes)
                    self.time_index.maybe_append(self.max_timestamp_so_far,
                                                 self.offset_of_max_timestamp_so_far)
                    last_index_entry = valid_bytes
                valid_bytes += header.size
                previous_last_offset = header.last_offset
                if on_batch is not None:
                    on_batch(header)
        except CorruptRecordError as exc:
            logger.warning("found invalid batches in %s at byte %d: %s", self.log.path,
                           valid_bytes, exc)
        truncated = self.log.size_in_bytes - valid_bytes
        if truncated > 0:
            self.log.truncate_to(valid_bytes)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self.max_timestamp_so_far,
                                     self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        return truncated

    def check_tail(self) -> str | None:
        """Why the segment's tail is damaged, or None: the cheap check of the last segment
        after a clean shutdown (``segment_integrity.check_tail``)."""
        return segment_integrity.check_tail(self.log, self.offset_index, self.base_offset)

    # -------------------------------------------------------------- truncate
    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> int:
        """Remove the batch holding ``offset`` and every later one (the truncation rule in the
        module docstring); returns the bytes removed. ``now_ms`` restarts the segment's age
        for time-based rolling if it becomes empty."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # After truncation this may be the active segment again: give the indexes room.
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if found is None else self.log.truncate_to(found[0])
        if self.size == 0:
            self._rolling_based_timestamp = None
            if now_ms is not None:
                self.created_ms = now_ms
        last_entry_position = self.offset_index.lookup(self.offset_index.last_offset).position
        self._bytes_since_last_index_entry = self.size - last_entry_position
        self._max_timestamp_and_offset = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        """The last time index entry, or a larger timestamp found in the batches after it."""
        last = self.time_index.last_entry
        position = self.offset_index.lookup(last.offset).position
        timestamp, offset = self.log.largest_timestamp_after(position)
        return TimestampOffset(timestamp, offset) if timestamp > last.timestamp else last

    # ------------------------------------------------------------------ roll
    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age of the segment for ``segment.ms``: ``message_timestamp`` minus the first
        batch's max timestamp, or ``now_ms`` minus the creation time without one."""
        if self._rolling_based_timestamp is None:
            first = next(iter(self.log.batches()), None)
            if first is not None:
                self._rolling_based_timestamp = first[1].max_timestamp
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return now_ms - self.created_ms

    def should_roll(self, params: RollParams) -> bool:
        """Roll before the next append if it would exceed ``segment.bytes``, the (non-empty)
        segment is older than ``segment.ms``, an index is full, or the append's last offset
        does not fit a 4-byte relative offset (Kafka's four rules)."""
        size = self.size
        reached_roll_ms = (
            self.time_waited_for_roll(params.now_ms, params.max_timestamp_in_messages)
            > params.max_segment_ms
        )
        return (
            size > params.max_segment_bytes - params.messages_size
            or (size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.offset_index.can_append_offset(params.max_offset_in_messages)
        )

    def on_become_inactive_segment(self) -> None:
        """On roll: write the final time index entry, trim the indexes and the ``.log``, whose
        descriptor then goes to the pool of inactive segments (``descriptor_pool``)."""
        self.time_index.maybe_append(self.max_timestamp_so_far,
                                     self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()
        self.log.make_inactive()  # its descriptor joins the pool of inactive segments

    # ------------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """fsync the ``.log`` and the ``.txnindex``, msync the indexes. Raises ``OSError``."""
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Write the final time index entry, then close (trim, flush) all three files."""
        try:
            if self._max_timestamp_and_offset is not None:
                self.time_index.maybe_append(self.max_timestamp_so_far,
                                             self.offset_of_max_timestamp_so_far,
                                             skip_full_check=True)
        finally:
            try:
                self.offset_index.close()
                self.time_index.close()
                self.txn_index.flush()
            finally:
                self.log.close()

    def release(self) -> None:
        """Close all three files without writing anything (a load that failed): a damaged
        segment is left on disk exactly as it was found."""
        try:
            self.offset_index.release()
            self.time_index.release()
        finally:
            self.log.release()

    def delete(self) -> None:
        """Close (no flush) and unlink all four files; missing files are fine."""
        try:
            self.offset_index.delete()
            self.time_index.delete()
            self.txn_index.delete()
        finally:
            self.log.delete()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files, e.g. ``("", ".deleted")`` or ``(".cleaned", ".swap")``."""
        for item in (self.log, self.offset_index, self.time_index, self.txn_index):
            item.rename_to(item.path.with_name(
                names.replace_suffix(item.path.name, old_suffix, new_suffix)))

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, log={self.log})"
