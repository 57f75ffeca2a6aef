"""The ``.index`` file: maps offsets to positions in the segment's ``.log`` (``OffsetIndex``).

Byte format: a sequence of 8-byte entries, big-endian, no header::

    0  relativeOffset  int32   offset - base_offset of the segment
    4  position        int32   byte position in the .log where that append started

An entry ``(offset, position)`` says: the batch starting at ``position`` has base offset
<= ``offset``, and every batch before ``position`` ends before ``offset`` - so a reader looking
for ``offset`` may start scanning batch headers at ``position``. The index is sparse: the
segment adds an entry only after more than ``index.interval.bytes`` were appended since the
previous one, keyed by the *last* offset of that append and pointing at the append's start.

Invariants: relative offsets and positions are strictly increasing; an entry's position is
inside the ``.log``. Crash policy: not checksummed; rebuilt from the ``.log`` by
``LogSegment.recover`` after an unclean shutdown or a failed ``sanity_check`` (see
``abstract_index``). Mutated only by the segment's owner thread.
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

_ENTRY = struct.Struct(">ii")
_MAX_POSITION = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """Sparse offset -> file position index of one segment."""

    entry_size = _ENTRY.size

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_offset = self._last_entry().offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or ``base_offset`` when empty."""
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry with its absolute offset."""
        if n < 0 or n >= self._entries:
            raise IndexError(f"slot {n} is outside the {self._entries} entries of {self.path}")
        rel, position = _ENTRY.unpack_from(self._buffer(), n * _ENTRY.size)
        return OffsetPosition(self.base_offset + rel, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry with offset <= ``target_offset``, else ``(base_offset, 0)``."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, self._rel_at)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must exceed the last entry's (or the base when empty)."""
        with self._lock:
            self._check_writable()
            if self.is_full():
                raise IndexError(f"attempt to append to a full index {self.path} "
                                 f"({self._entries} entries)")
            if self._entries and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} at position {position} no larger than "
                    f"the last offset appended ({self._last_offset}) to {self.path}"
                )
            if not 0 <= position <= _MAX_POSITION:
                raise ValueError(f"position {position} is not an int32 >= 0 ({self.path})")
            self._append_entry(_ENTRY.pack(self.relative_offset(offset), position))
            self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        with self._lock:
            slot = self._largest_lower_bound_slot(offset - self.base_offset - 1, self._rel_at)
            self.truncate_to_entries(slot + 1)
            self._last_offset = self._last_entry().offset

    def truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            super().truncate_to_entries(entries)
            self._last_offset = self._last_entry().offset

    def resize(self, new_size: int) -> bool:
        with self._lock:
            changed = super().resize(new_size)
            self._last_offset = self._last_entry().offset
            return changed

    def sanity_check(self) -> None:
        """Whole entries; relative offsets >= 0 and strictly increasing, positions too (over
        the sample of ``_sample_slots``). The zero tail of a crashed, untrimmed file breaks
        the order and fails here."""
        super().sanity_check()
        previous: tuple[int, int] | None = None
        for slot in self._sample_slots():
            rel, position = _ENTRY.unpack_from(self._buffer(), slot * _ENTRY.size)
            if previous is None:
                if rel < 0 or position < 0:
                    raise CorruptIndexError(f"index file {self.path} has a negative first "
                                            f"entry ({rel}, {position})")
            elif rel <= previous[0] or position <= previous[1]:
                raise CorruptIndexError(
                    f"index file {self.path} is out of order at slot {slot} of "
                    f"{self._entries}: entry (offset {self.base_offset + rel}, position "
                    f"{position}) follows (offset {self.base_offset + previous[0]}, position "
                    f"{previous[1]})"
                )
            previous = (rel, position)

    # ------------------------------------------------------------ internals
    def _rel_at(self, slot: int) -> int:
        return int(_ENTRY.unpack_from(self._buffer(), slot * _ENTRY.size)[0])

    def _last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)
