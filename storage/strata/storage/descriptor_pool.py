"""Open descriptors of inactive segments' ``.log`` files: one bounded, process-wide LRU pool.

A hosted partition keeps one descriptor at rest, its active segment's ``.log``, which its
``FileRecords`` owns. Every other ``.log`` - an inactive segment found at load, rolled, or
swapped in by the cleaner - borrows a descriptor from ``DESCRIPTOR_POOL`` when a read (or a
flush, a recovery scan) needs one. The pool keeps at most ``max_open`` of them open
(``MAX_OPEN_INACTIVE_SEGMENTS``, counted by ``strata.broker.partition_capacity`` on top of its
reserve); opening one more closes the least recently used entry's, and that file opens again,
by its current path, on its next use. Kafka keeps every segment open and asks for a large
``nofile``; this pool is what lets a 20,000-descriptor broker host ~18,700 partitions.

Descriptor lifetime (the hazard this module exists to handle): a ``Descriptor`` is one open fd,
closed when the last reference to it goes (CPython frees it at that moment; ``__del__`` closes
it, nothing else ever does). The pool, or an active file's ``FileRecords``, holds one
reference; every ``FileSlice`` read from the file holds another, and so does every read in
progress (its local variable). So an eviction, ``close``, ``release`` or ``delete`` only drops
the owner's reference: a slice still waiting for its ``sendfile`` after an ``await``, or a
cleaner thread halfway through a scan, keeps the descriptor open, and its fd number cannot be
reused by another open (which would send another file's bytes) until that slice is dropped.
Descriptors evicted but still held that way are outside ``max_open``: their number is bounded
by the reads in flight (the slices of the responses being written).

Invariants: at most one entry per owner; ``len(pool) <= max_open`` after every call; an entry is
only ever added by ``checkout`` (a read) or ``adopt`` (a roll), and removed by eviction,
``claim`` (the file became active again) or ``discard`` (closed or deleted).

Threads: the event loop, the cleaner's and the flusher's worker threads all borrow from the
pool; one lock guards the entries and the opening of a file (so an owner's rename, done under
``lock`` too, is never seen half done). A descriptor is closed outside the lock when possible.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

MAX_OPEN_INACTIVE_SEGMENTS: Final = 256
"""Descriptors of inactive segments' ``.log`` files open at once in a broker process."""


class Descriptor:
    """One open file descriptor, closed when the last reference to this object is dropped.

    Hold it (not ``fd``, a bare number) for as long as the fd is used: ``fd`` is valid exactly
    while some reference to its ``Descriptor`` lives."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        with contextlib.suppress(OSError):  # never raised from a finaliser
            os.close(self.fd)

    def __repr__(self) -> str:
        return f"Descriptor({self.fd})"


class DescriptorPool:
    """The LRU of descriptors of inactive ``.log`` files (module docstring). Owners are the
    ``FileRecords`` objects, compared by identity."""

    def __init__(self, max_open: int = MAX_OPEN_INACTIVE_SEGMENTS) -> None:
        if max_open < 1:
            raise ValueError(f"a descriptor pool holds at least one descriptor, not {max_open}")
        self._max_open = max_open
        self._open: OrderedDict[object, Descriptor] = OrderedDict()
        self.lock = threading.Lock()
        self.opened = 0  # descriptors opened by ``checkout`` (a reopen after eviction counts)
        self.evicted = 0  # entries dropped to stay within ``max_open``

    @property
    def max_open(self) -> int:
        return self._max_open

    def resize(self, max_open: int) -> None:
        """Change the bound (evicting the least recently used entries beyond it)."""
        if max_open < 1:
            raise ValueError(f"a descriptor pool holds at least one descriptor, not {max_open}")
        with self.lock:
            self._max_open = max_open
            victims = self._evict_beyond_bound()
        del victims  # closed here, outside the lock (unless a slice still holds one)

    def __len__(self) -> int:
        return len(self._open)

    def holds(self, owner: object) -> bool:
        """Whether ``owner``'s descriptor is in the pool now (no LRU update)."""
        return owner in self._open

    def peek(self, owner: object) -> Descriptor | None:
        """``owner``'s descriptor if the pool holds it, without touching the LRU order."""
        with self.lock:
            return self._open.get(owner)

    def checkout(self, owner: object, open_fd: Callable[[], int]) -> Descriptor:
        """``owner``'s descriptor, now the most recently used; ``open_fd()`` opens it (under
        the pool's lock) if it is not in the pool. Keep the result while using its fd."""
        with self.lock:
            descriptor = self._open.get(owner)
            if descriptor is not None:
                self._open.move_to_end(owner)
                return descriptor
            descriptor = Descriptor(open_fd())
            self.opened += 1
            self._open[owner] = descriptor
            victims = self._evict_beyond_bound()
        del victims
        return descriptor

    def adopt(self, owner: object, descriptor: Descriptor) -> None:
        """Take an open descriptor in as the most recently used (a file became inactive)."""
        with self.lock:
            self._open[owner] = descriptor
            self._open.move_to_end(owner)
            victims = self._evict_beyond_bound()
        del victims

    def claim(self, owner: object) -> Descriptor | None:
        """Take ``owner``'s descriptor out of the pool (its file became active again)."""
        with self.lock:
            return self._open.pop(owner, None)

    def discard(self, owner: object) -> None:
        """Forget ``owner`` (closed or deleted): its descriptor closes as soon as no slice
        holds it."""
        with self.lock:
            descriptor = self._open.pop(owner, None)
        del descriptor

    def evict_all(self) -> None:
        """Drop every entry (each file reopens on its next use)."""
        with self.lock:
            victims = list(self._open.values())
            self._open.clear()
            self.evicted += len(victims)
        del victims

    def _evict_beyond_bound(self) -> list[Descriptor]:
        victims = []
        while len(self._open) > self._max_open:
            victims.append(self._open.popitem(last=False)[1])
        self.evicted += len(victims)
        return victims


DESCRIPTOR_POOL: Final = DescriptorPool()
"""The pool every ``FileRecords`` of this process borrows from."""
