"""The ``.timeindex`` file: maps timestamps to offsets of the segment (``TimeIndex``).

Byte format: a sequence of 12-byte entries, big-endian, no header::

    0  timestamp       int64   the largest record timestamp seen in the segment so far
    8  relativeOffset  int32   offset - base_offset of the batch holding that timestamp
                               (its last offset)

An entry ``(timestamp, offset)`` says: no batch before the one containing ``offset`` holds a
timestamp >= ``timestamp``. So a search for the first record with timestamp >= T starts at the
entry with the largest timestamp <= T. Entries are added together with offset index entries
(every ``index.interval.bytes``), and once more when the segment becomes inactive or is closed,
so the last entry of an inactive segment carries its max timestamp.

Invariants: timestamps strictly increase, offsets never decrease (``maybe_append`` ignores an
entry whose timestamp is not above the last one). The last slot of the capacity is reserved
for the roll/close entry: ``is_full`` is true one entry early (Kafka's rule). Crash policy: not
checksummed; rebuilt from the ``.log`` by ``LogSegment.recover`` after an unclean shutdown or a
failed ``sanity_check``. Mutated only by the segment's owner thread.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from strata.storage.abstract_index import (
    DEFAULT_MAX_INDEX_SIZE,
    AbstractIndex,
    CorruptIndexError,
    InvalidOffsetError,
)
from strata.storage.record_batch import NO_TIMESTAMP

_ENTRY = struct.Struct(">qi")
_TIMESTAMP = struct.Struct(">q")
_REL_OFFSET = struct.Struct(">i")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """Sparse timestamp -> offset index of one segment."""

    entry_size = _ENTRY.size

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last = self._last_entry_from_index_file()

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        return self._last

    def is_full(self) -> bool:
        """One slot early: the last one is kept for the entry written on roll/close."""
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        if n < 0 or n >= self._entries:
            raise IndexError(f"slot {n} is outside the {self._entries} entries of {self.path}")
        timestamp, rel = _ENTRY.unpack_from(self._buffer(), n * _ENTRY.size)
        return TimestampOffset(timestamp, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's; else no-op.

        ``skip_full_check`` is for the final entry on roll/close (uses the reserved slot).
        Raises ``InvalidOffsetError`` if a newer timestamp comes with an older offset.
        """
        with self._lock:
            self._check_writable()
            if not skip_full_check and self.is_full():
                raise IndexError(f"attempt to append to a full time index {self.path} "
                                 f"({self._entries} entries)")
            if timestamp <= self._last.timestamp:
                return
            if self._entries and offset < self._last.offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} with timestamp {timestamp} to "
                    f"{self.path}, below the last entry's offset {self._last.offset}"
                )
            self._append_entry(_ENTRY.pack(timestamp, self.relative_offset(offset)))
            self._last = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= ``target_timestamp``, else ``(-1, base_offset)``."""
        slot = self._largest_lower_bound_slot(target_timestamp, self._timestamp_at)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        with self._lock:
            slot = self._largest_lower_bound_slot(offset - self.base_offset - 1, self._rel_at)
            self.truncate_to_entries(slot + 1)

    def truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            super().truncate_to_entries(entries)
            self._last = self._last_entry_from_index_file()

    def resize(self, new_size: int) -> bool:
        with self._lock:
            changed = super().resize(new_size)
            self._last = self._last_entry_from_index_file()
            return changed

    def sanity_check(self) -> None:
        """Whole entries; timestamps strictly increasing, offsets >= base and non-decreasing
        (over the sample of ``_sample_slots``). The zero tail of a crashed, untrimmed file
        breaks the order and fails here."""
        super().sanity_check()
        prev_ts, prev_rel = -(1 << 63) - 1, 0
        for slot in self._sample_slots():
            timestamp, rel = _ENTRY.unpack_from(self._buffer(), slot * _ENTRY.size)
            if timestamp <= prev_ts or rel < prev_rel:
                raise CorruptIndexError(
                    f"time index file {self.path} is out of order at slot {slot} of "
                    f"{self._entries}: entry ({timestamp}, {self.base_offset + rel}) follows "
                    f"({prev_ts}, {self.base_offset + prev_rel})"
                )
            prev_ts, prev_rel = timestamp, rel

    # ------------------------------------------------------------ internals
    def _timestamp_at(self, slot: int) -> int:
        return int(_TIMESTAMP.unpack_from(self._buffer(), slot * _ENTRY.size)[0])

    def _rel_at(self, slot: int) -> int:
        return int(_REL_OFFSET.unpack_from(self._buffer(), slot * _ENTRY.size + 8)[0])

    def _last_entry_from_index_file(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)
