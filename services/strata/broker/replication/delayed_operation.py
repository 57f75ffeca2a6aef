"""Purgatory: requests that wait for something to happen on a partition, on asyncio futures.

Kafka's ``DelayedOperationPurgatory`` without timer wheels or reaper threads: one event loop
owns everything, so a waiting request is one ``asyncio.Future`` registered under the keys
(``(topic, partition)``) it watches, and a timer handle for its deadline. Nothing polls or
sleeps in a loop:

* ``Purgatory.notify(key)`` — called by the ``ReplicaManager`` after an append (or any change
  that may complete a waiter: HW moved, leadership lost) — resolves every future watching
  ``key`` at once; the woken operations re-check their condition;
* ``Purgatory.wait_any(keys)`` — one registration for a wait on a large set of keys (a
  follower's fetch session: every partition this broker leads for it, a thousand on a busy
  broker) instead of one per key: ``notify`` offers each key to these few waiters, which
  collect every key notified until their wait ends, so the woken fetch re-checks only those;
* a deadline fires through ``loop.call_later``;
* with ``journal``, every key notified is also written to a bounded journal (``position`` and
  ``notified_since``), so a reader that is not waiting — a follower's fetch session between two
  fetches — can learn afterwards which keys were notified since it last looked, in time
  proportional to the notifications, not to its keys.

``DelayedFetch`` is the long poll of a Fetch request (``fetch.min.bytes`` / ``max.wait.ms``):
``try_complete`` re-reads the partitions and returns a result once enough bytes are there (or
an error must be answered); on expiry the caller answers with whatever is there. A delayed
produce (acks=all waiting for the ISR) waits in its own purgatory with ``Purgatory.wait`` and
re-checks its partitions' high watermarks after each wake-up (``ReplicaManager``).

Invariants: a future is registered under its keys (or as a set waiter) only while its
operation awaits it, and is removed when the await ends (woken, expired or cancelled because
the client went away), so the purgatory holds nothing for finished requests. A set waiter is
told every key notified from its registration to its removal. The journal holds the last
``journal_size`` to ``2 * journal_size`` keys notified, in order: ``notified_since(p)`` is every
key notified since ``position`` was ``p``, or None when some of them were dropped (the reader
must then assume anything changed). Event-loop only; no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class _SetWaiter(Generic[K]):
    """A ``wait_any``: its keys, its future, the keys notified so far."""

    __slots__ = ("fired", "future", "keys")

    def __init__(self, keys: AbstractSet[K], future: asyncio.Future[bool]) -> None:
        self.keys = keys
        self.future = future
        self.fired: list[K] = []


DEFAULT_JOURNAL_SIZE: Final = 16_384


class Purgatory(Generic[K]):
    """Futures keyed by what they watch. ``notify`` wakes all watchers of one key."""

    __slots__ = ("_journal", "_journal_base", "_journal_size", "_set_waiters", "_watchers",
                 "name")

    def __init__(self, name: str, *, journal: bool = False,
                 journal_size: int = DEFAULT_JOURNAL_SIZE) -> None:
        self.name = name
        # key -> futures watching it (a dict as an insertion-ordered set)
        self._watchers: dict[K, dict[asyncio.Future[bool], None]] = {}
        self._set_waiters: list[_SetWaiter[K]] = []
        self._journal: list[K] | None = [] if journal else None
        self._journal_base = 0  # the position of ``_journal[0]``
        self._journal_size = journal_size

    @property
    def position(self) -> int:
        """How many keys were notified so far (with a journal; else 0)."""
        journal = self._journal
        return 0 if journal is None else self._journal_base + len(journal)

    def notified_since(self, position: int) -> list[K] | None:
        """Every key notified since ``position`` was read, in order with repeats; None when
        the journal no longer holds them all (or there is no journal)."""
        journal = self._journal
        start = position - self._journal_base
        if journal is None or start < 0:
            return None
        return journal[start:]

    def __len__(self) -> int:
        """Number of distinct waiting futures (for metrics and tests)."""
        futures = {f for watchers in self._watchers.values() for f in watchers}
        return len(futures | {w.future for w in self._set_waiters})

    def watched(self, key: K) -> int:
        """How many futures watch ``key``."""
        return len(self._watchers.get(key, ())) + sum(
            1 for w in self._set_waiters if key in w.keys)

    def notify(self, key: K) -> int:
        """Wake every future watching ``key``; returns how many were woken. Cheap (one dict
        lookup, and a set lookup per set waiter) when nobody waits on it, which is the common
        case on the produce path."""
        journal = self._journal
        if journal is not None:
            journal.append(key)
            if len(journal) >= 2 * self._journal_size:
                drop = len(journal) - self._journal_size
                del journal[:drop]
                self._journal_base += drop
        woken = 0
        for waiter in self._set_waiters:
            if key in waiter.keys:
                waiter.fired.append(key)
                if not waiter.future.done():
                    waiter.future.set_result(True)
                    woken += 1
        watchers = self._watchers.pop(key, None)
        if not watchers:
            return woken
        for future in watchers:
            if not future.done():
                future.set_result(True)
                woken += 1
        return woken

    async def wait_any(self, keys: AbstractSet[K], timeout_s: float) -> list[K]:
        """Wait until one of ``keys`` is notified or ``timeout_s`` passes: every key notified
        meanwhile, in order, with repeats (empty: the time passed). One registration, however
        many the keys; ``keys`` must not change while the wait lasts."""
        if timeout_s <= 0:
            return []
        loop = asyncio.get_running_loop()
        waiter = _SetWaiter(keys, loop.create_future())
        self._set_waiters.append(waiter)
        timer = loop.call_later(timeout_s, _expire, waiter.future)
        try:
            await waiter.future
        finally:
            timer.cancel()
            self._set_waiters.remove(waiter)
        return waiter.fired

    async def wait(self, keys: Sequence[K], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified (True) or ``timeout_s`` passes (False)."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        for key in keys:
            watchers = self._watchers.get(key)
            if watchers is None:
                watchers = self._watchers[key] = {}
            watchers[future] = None
        timer = loop.call_later(timeout_s, _expire, future)
        try:
            return await future
        finally:
            timer.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.pop(future, None)
                    if not watchers:
                        del self._watchers[key]


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


class DelayedFetch(Generic[K, T]):
    """A fetch waiting for ``min_bytes``: completes early when ``try_complete`` returns a
    result after a wake-up, else at its deadline with ``on_expiration()``.

    ``try_complete`` is called after every wake-up (an append to a watched partition); it
    returns None while the fetch should keep waiting.
    """

    __slots__ = ("keys", "max_wait_ms", "on_expiration", "try_complete")

    def __init__(
        self,
        keys: Sequence[K],
        max_wait_ms: int,
        try_complete: Callable[[], T | None],
        on_expiration: Callable[[], T],
    ) -> None:
        self.keys = keys
        self.max_wait_ms = max_wait_ms
        self.try_complete = try_complete
        self.on_expiration = on_expiration

    async def run(self, purgatory: Purgatory[K]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_ms / 1000
        while True:
            remaining = deadline - loop.time()
            if not await purgatory.wait(self.keys, remaining):
                return self.on_expiration()
            result = self.try_complete()
            if result is not None:
                return result
