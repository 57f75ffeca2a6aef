"""Purgatory: requests that wait for something to happen on a partition, on asyncio futures.

Kafka's ``DelayedOperationPurgatory`` without timer wheels or reaper threads: one event loop
owns everything, so a waiting request is one ``asyncio.Future`` registered under the keys
(``(topic, partition)``) it watches, and a timer handle for its deadline. Nothing polls or
sleeps in a loop:

* ``Purgatory.notify(key)`` — called by the ``ReplicaManager`` after an append (or any change
  that may complete a waiter: HW moved, leadership lost) — resolves every future watching
  ``key`` at once; the woken operations re-check their condition;
* a deadline fires through ``loop.call_later``.

``DelayedFetch`` is the long poll of a Fetch request (``fetch.min.bytes`` / ``max.wait.ms``):
``try_complete`` re-reads the partitions and returns a result once enough bytes are there (or
an error must be answered); on expiry the caller answers with whatever is there. A delayed
produce (acks=all waiting for the ISR) waits in its own purgatory with ``Purgatory.wait`` and
re-checks its partitions' high watermarks after each wake-up (``ReplicaManager``).

Invariants: a future is registered under its keys only while its operation awaits it, and is
removed from every key when the await ends (woken, expired or cancelled because the client went
away), so the purgatory holds nothing for finished requests. Event-loop only; no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Purgatory(Generic[K]):
    """Futures keyed by what they watch. ``notify`` wakes all watchers of one key."""

    __slots__ = ("_watchers", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        # key -> futures watching it (a dict as an insertion-ordered set)
        self._watchers: dict[K, dict[asyncio.Future[bool], None]] = {}

    def __len__(self) -> int:
        """Number of distinct waiting futures (for metrics and tests)."""
        return len({f for watchers in self._watchers.values() for f in watchers})

    def watched(self, key: K) -> int:
        """How many futures watch ``key``."""
        return len(self._watchers.get(key, ()))

    def notify(self, key: K) -> int:
        """Wake every future watching ``key``; returns how many were woken. Cheap (one dict
        lookup) when nobody waits, which is the common case on the produce path."""
        watchers = self._watchers.pop(key, None)
        if not watchers:
            return 0
        woken = 0
        for future in watchers:
            if not future.done():
                future.set_result(True)
                woken += 1
        return woken

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
