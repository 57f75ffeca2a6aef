"""Shared mechanics of a segment index: a file of fixed-size entries, mmap'd (``AbstractIndex``).

Subclasses (``OffsetIndex``, ``TimeIndex``) add only their entry size, entry parsing and the
keys they search by. This base owns the file, the mapping and the entry count.

File layout: ``entries`` fixed-size entries from byte 0, sorted by key (no header, no checksum).
A *writable* index is preallocated when created: the file is sized to ``max_index_size`` rounded
down to a multiple of the entry size, so the bytes after the last entry are zeros.
``trim_to_valid_size`` (on roll and close) shrinks the file to exactly its entries, so a cleanly
closed index is ``entries * entry_size`` bytes long. A trimmed index that is appended to again
(the active segment after a restart) grows back to ``max_index_size`` on demand.

On open, the entry count is ``file length // entry size`` (Kafka's rule). After a crash a
preallocated file still has its zero tail, so that count is too large; ``sanity_check`` spots
the inconsistency (zero slots break the strictly increasing keys; it compares the last entries
and an evenly spaced sample, so it costs the same for any size) and the loader rebuilds the
index from the ``.log`` (``LogSegment.recover``).

Crash policy: indexes are not checksummed and never fsynced on the append path. They are a cache
of the ``.log``: after an unclean shutdown every segment after the recovery point has its
indexes rebuilt, and any index that fails ``sanity_check`` is rebuilt too.

Descriptors: none is kept open. The file is opened only to size and map it (``FileMapping``
keeps no descriptor) and whenever ``resize`` changes its length; a segment's indexes
therefore cost no file descriptor however many partitions the broker hosts.

Threads: appends, lookups and truncation run on the log's owner thread; ``flush`` may run on a
worker thread. Operations that replace the mapping (resize, trim, close) and ``flush`` hold
``_lock`` so a flush never touches a closed mapping.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from strata.storage.errors import StorageError
from strata.storage.file_mapping import FileMapping, map_file

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
MAX_RELATIVE_OFFSET = (1 << 31) - 1  # relative offsets are stored as a signed int32
SANITY_SAMPLES = 1024  # entries a sanity check compares (about one per 4 KiB page up to 1 GiB)


class CorruptIndexError(StorageError):
    """An index file is inconsistent (bad length, unordered or zero entries): rebuild it."""


class InvalidOffsetError(StorageError):
    """An index append out of order (Kafka's ``InvalidOffsetException``)."""


class IndexOffsetOverflowError(StorageError):
    """An offset too far from the segment's base to fit a 4-byte relative offset."""


class AbstractIndex:
    """A memory-mapped file of ``entry_size``-byte entries for the segment at ``base_offset``."""

    entry_size: int = 0  # set by each subclass

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        """Open ``path``, creating (and, if writable, preallocating) it when absent."""
        if self.entry_size <= 0:
            raise TypeError("AbstractIndex is abstract: use OffsetIndex or TimeIndex")
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._writable_capacity = max(max_index_size // self.entry_size, 0)
        self._lock = threading.RLock()
        self._dirty = False
        self._corrupt_reason: str | None = None
        existed = path.exists()
        if not existed and not writable:
            raise FileNotFoundError(f"index file {path} does not exist")
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        try:
            if not existed:
                os.ftruncate(fd, self._round_down(max_index_size))
            self._length = os.fstat(fd).st_size
            self._mmap = self._map(fd, self._length)
        finally:
            os.close(fd)
        self._entries = 0 if not existed else self._length // self.entry_size
        self._closed = False

    # ---------------------------------------------------------------- sizes
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        """Capacity: ``max_index_size // entry_size`` (the file may be shorter until it grows)."""
        if not self.writable:
            return self._length // self.entry_size
        return self._writable_capacity

    @property
    def length(self) -> int:
        """Current file length in bytes (preallocated or trimmed)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        if self.writable:  # inlined max_entries: checked on every append
            return self._entries >= self._writable_capacity
        return self._entries >= self._length // self.entry_size

    # -------------------------------------------------------------- offsets
    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``; raises ``IndexOffsetOverflowError`` if not an int32 >= 0."""
        rel = offset - self.base_offset
        if rel < 0 or rel > MAX_RELATIVE_OFFSET:
            raise IndexOffsetOverflowError(
                f"offset {offset} is not representable relative to base offset "
                f"{self.base_offset} in {self.path}"
            )
        return rel

    def can_append_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= MAX_RELATIVE_OFFSET

    # ---------------------------------------------------------------- read
    def _buffer(self) -> memoryview:
        if self._mmap is None:
            raise ValueError(f"index {self.path} has no mapped entries")
        return self._mmap.view

    def _largest_lower_bound_slot(self, target: int, key: Callable[[int], int]) -> int:
        """Slot of the last entry whose ``key(slot) <= target``, or -1 if there is none.

        Keys must be non-decreasing in slot order (checked by ``sanity_check``).
        """
        n = self._entries
        if n == 0 or key(0) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _sample_slots(self) -> list[int]:
        """Slots a sanity check compares, in order: all of them for up to ``SANITY_SAMPLES``
        entries, else that many evenly spaced ones including the last two.

        Entries must be strictly ordered, so every subsequence is too: checking a sample never
        rejects a good index, and it catches what a crash leaves (a zero tail, zeroed pages)
        at a fixed cost instead of a full scan of every segment's index at startup.
        """
        n = self._entries
        if n <= SANITY_SAMPLES:
            return list(range(n))
        step = SANITY_SAMPLES - 1
        return sorted({*(i * (n - 1) // step for i in range(SANITY_SAMPLES)), n - 2})

    # --------------------------------------------------------------- write
    def _append_entry(self, entry: bytes) -> None:
        """Write one packed entry after the last; grows a trimmed file back to capacity.

        Checks only the capacity: ``is_full`` (which ``TimeIndex`` tightens) is the caller's.
        """
        self._check_writable()
        if self._entries >= self.max_entries:
            raise IndexError(f"attempt to append to a full index {self.path} "
                             f"({self._entries} entries)")
        end = (self._entries + 1) * self.entry_size
        if end > self._length:
            self.resize(self.max_index_size)
        buf = self._buffer()
        buf[end - self.entry_size : end] = entry
        self._entries += 1
        self._dirty = True

    def _check_writable(self) -> None:
        if not self.writable:
            raise ValueError(f"index {self.path} is read-only")

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; remaps.

        Entries beyond the new length are dropped. Returns False if the length was already so.
        """
        rounded = self._round_down(new_size)
        with self._lock:
            if rounded == self._length:
                return False
            if not self.writable:
                raise ValueError(f"index {self.path} is read-only")
            self._unmap()
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                self._length = rounded
                self._mmap = self._map(fd, rounded)
            finally:
                os.close(fd)
            self._entries = min(self._entries, rounded // self.entry_size)
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (done on roll and close)."""
        if self.writable:
            self.resize(self._entries * self.entry_size)

    def truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries; the freed slots are zeroed."""
        with self._lock:
            if entries < 0 or entries > self._entries:
                raise ValueError(f"cannot truncate {self.path} to {entries} of "
                                 f"{self._entries} entries")
            if entries < self._entries:
                start, end = entries * self.entry_size, self._entries * self.entry_size
                self._buffer()[start:end] = bytes(end - start)
                self._dirty = True
            self._entries = entries

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for offsets >= ``offset`` (subclasses implement)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Empty the index and give it its full capacity again (before a rebuild).

        The file is cut to nothing and grown back, so the OS hands back zeros without writing
        them: zeroing a preallocated 10 MiB mapping per index (an index left full-length by an
        unclean shutdown) made restarting 1,000 partitions take ~80 s."""
        with self._lock:
            if self.writable:
                self._entries = 0
                self._dirty = False
                self.resize(0)
            else:
                self.truncate_to_entries(0)
            self.resize(self.max_index_size)
            self._corrupt_reason = None

    def mark_corrupt(self, reason: str) -> None:
        """Make ``sanity_check`` fail with ``reason`` until ``reset`` (the segment found the
        index inconsistent with its ``.log``, e.g. missing or pointing past its end)."""
        self._corrupt_reason = reason

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` unless the file is whole entries; subclasses add order."""
        if self._corrupt_reason is not None:
            raise CorruptIndexError(self._corrupt_reason)
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self._length}, not a multiple of the "
                f"entry size {self.entry_size}"
            )

    # ----------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """Write dirty mapped pages back to the file (msync)."""
        with self._lock:
            if self._dirty and self._mmap is not None and not self._closed:
                self._dirty = False
                self._mmap.flush()

    def close(self) -> None:
        """Trim to the valid entries, flush and release the mapping and the file. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.writable:
                    self.flush()
                    self.trim_to_valid_size()
            finally:
                self._release()

    def release(self) -> None:
        """Close without flushing or trimming (the file is left as it is). Idempotent."""
        with self._lock:
            self._release()

    def delete(self) -> bool:
        """Close without trimming and unlink the file; True if it existed."""
        with self._lock:
            self._release()
            try:
                self.path.unlink()
            except FileNotFoundError:
                return False
            return True

    def rename_to(self, path: Path) -> None:
        """Rename the file (if it still exists); the mapping stays valid."""
        with self._lock:
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.path, path)
            self.path = path

    # ------------------------------------------------------------ internals
    def _round_down(self, size: int) -> int:
        return max(size, 0) // self.entry_size * self.entry_size

    def _map(self, fd: int, length: int) -> FileMapping | None:
        # mmap of a zero-length file fails: an empty index simply has no mapping.
        if length == 0:
            return None
        return map_file(fd, length, self.writable)

    def _unmap(self) -> None:
        # Unmapping a shared mapping loses nothing: dirty pages stay in the page cache.
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _release(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(path={str(self.path)!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self.max_entries})")
