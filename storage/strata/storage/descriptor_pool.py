"""Open descriptors of inactive segments' ``.log`` files: one bounded, process-wide LRU pool.

A hosted partition keeps one descriptor at rest, its active segment's ``.log``, which its
``FileRecords`` owns. Every other ``.log`` - an inactive segment found at load, rolled, or
swapped in by the cleaner - borrows a descriptor from ``DESCRIPTOR_POOL`` when a read (or a
flush, a recovery scan) needs one, and the next use reopens it by its current path if the pool
closed it meanwhile. Kafka keeps every segment open and asks for a large ``nofile``; this pool
is what lets a 20,000-descriptor broker host ~18,700 partitions.

Descriptor lifetime (the hazard this module exists to handle): a ``Descriptor`` is one open fd,
closed when the last reference to it goes (CPython frees it at that moment; ``__del__`` closes
it, nothing else ever does). The pool, or an active file's ``FileRecords``, holds one
reference; every ``FileSlice`` read from the file holds another, and so does every read in
progress (its local variable). So an eviction, ``close``, ``release`` or ``delete`` only drops
the owner's reference: a slice still waiting for its ``sendfile`` after an ``await``, or a
cleaner thread halfway through a scan, keeps the descriptor open, and its fd number cannot be
reused by another open (which would send another file's bytes) until that slice is dropped.

The bound, ``max_open`` (``MAX_OPEN_INACTIVE_SEGMENTS``, budgeted by
``strata.broker.partition_capacity`` on top of its reserve), counts every *live* descriptor the
pool opened or adopted: those it holds and those it evicted that slices still hold. A use that
finds the pool full evicts the least recently used entry; if the pool is still at its bound
(slices hold what it evicted: one Fetch reading 10,000 partitions' old segments) the use gets a
*transient* descriptor instead, outside the pool, that closes when that use ends: ``checkout``
says so, and ``FileRecords.slice`` then reads the bytes into the slice rather than pinning the
descriptor. A few transient descriptors (one per thread reading at that moment) may be open
beyond the bound.

Invariants: at most one entry per owner; entries <= live <= ``max_open`` except that ``adopt``
of a rolled segment's descriptor is refused (the descriptor is dropped) rather than exceed it;
an entry is only added by ``checkout`` (a read) or ``adopt`` (a roll), and removed by eviction,
``claim`` (the file became active again) or ``discard`` (closed or deleted).

Threads: the event loop, the cleaner's and the flusher's worker threads all borrow from the
pool; one lock guards the entries and the opening of a file (so an owner's rename, done under
``lock`` too, is never seen half done). Evicted descriptors are dropped outside the lock (a
``Descriptor`` that closes runs ``__del__``, and the live set's weak references update then).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

MAX_OPEN_INACTIVE_SEGMENTS: Final = 256
"""Descriptors of inactive segments' ``.log`` files open at once in a broker process (held by
the pool or by slices), beside a few transient ones."""


class Descriptor:
    """One open file descriptor, closed when the last reference to this object is dropped.

    Hold it (not ``fd``, a bare number) for as long as the fd is used: ``fd`` is valid exactly
    while some reference to its ``Descriptor`` lives."""

    __slots__ = ("__weakref__", "fd")

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
        self._live: weakref.WeakSet[Descriptor] = weakref.WeakSet()  # entries + evicted, held
        self.lock = threading.Lock()
        self.opened = 0  # descriptors opened into the pool (a reopen after eviction counts)
        self.evicted = 0  # entries dropped to make room
        self.transient = 0  # descriptors opened outside the pool: it was at its bound

    @property
    def max_open(self) -> int:
        return self._max_open

    @property
    def live(self) -> int:
        """Descriptors the pool opened or adopted that are still open (held by it or slices)."""
        return len(self._live)

    def resize(self, max_open: int) -> None:
        """Change the bound (evicting the least recently used entries beyond it)."""
        if max_open < 1:
            raise ValueError(f"a descriptor pool holds at least one descriptor, not {max_open}")
        with self.lock:
            self._max_open = max_open
            victims = self._evict_down_to(max_open)
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

    def checkout(self, owner: object, open_fd: Callable[[], int]) -> tuple[Descriptor, bool]:
        """``(descriptor, pooled)``: ``owner``'s descriptor, now the most recently used, opened
        by ``open_fd()`` (under the pool's lock) if the pool does not hold it. ``pooled`` is
        False for a transient descriptor (the pool is at its bound, slices holding what it
        evicted): do not keep it beyond this use. Keep the result while using its fd."""
        with self.lock:
            descriptor = self._open.get(owner)
            if descriptor is not None:
                self._open.move_to_end(owner)
                return descriptor, True
            victims = self._evict_down_to(self._max_open - 1)
        del victims  # those no slice holds close now and leave the live set
        with self.lock:
            descriptor = self._open.get(owner)  # opened by another thread meanwhile
            if descriptor is not None:
                self._open.move_to_end(owner)
                return descriptor, True
            descriptor = Descriptor(open_fd())
            if len(self._live) >= self._max_open:
                self.transient += 1
                return descriptor, False
            self.opened += 1
            self._open[owner] = descriptor
            self._live.add(descriptor)
            return descriptor, True

    def adopt(self, owner: object, descriptor: Descriptor) -> None:
        """Take an open descriptor in as the most recently used (a file became inactive); at
        the bound it is dropped instead (closing once no slice holds it)."""
        with self.lock:
            victims = self._evict_down_to(self._max_open - 1)
        del victims
        with self.lock:
            if len(self._live) < self._max_open:
                self._open[owner] = descriptor
                self._open.move_to_end(owner)
                self._live.add(descriptor)

    def claim(self, owner: object, open_fd: Callable[[], int]) -> Descriptor:
        """``owner``'s descriptor taken out of the pool (its file became active again and owns
        it from now on), or a new one opened by ``open_fd()``."""
        with self.lock:
            descriptor = self._open.pop(owner, None)
            if descriptor is None:
                return Descriptor(open_fd())
            self._live.discard(descriptor)
            return descriptor

    def discard(self, owner: object) -> None:
        """Forget ``owner`` (closed or deleted): its descriptor closes as soon as no slice
        holds it."""
        with self.lock:
            descriptor = self._open.pop(owner, None)
        del descriptor

    def evict_all(self) -> None:
        """Drop every entry (each file reopens on its next use)."""
        with self.lock:
            victims = self._evict_down_to(0)
        del victims

    def _evict_down_to(self, entries: int) -> list[Descriptor]:
        victims = []
        while len(self._open) > max(entries, 0):
            victims.append(self._open.popitem(last=False)[1])
        self.evicted += len(victims)
        return victims


DESCRIPTOR_POOL: Final = DescriptorPool()
"""The pool every ``FileRecords`` of this process borrows from."""
