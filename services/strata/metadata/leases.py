"""Lease handles and the keep-alive task that both backends share.

A ``Lease`` is what ``grant_lease`` returns: its id (the number keys are put with), its granted
TTL, and whether it is known to be lost. ``LeaseKeeper`` owns one asyncio task per kept-alive
lease, which refreshes it every ``ttl_s / 3`` through the backend's ``refresh`` callable (our
own task, not aetcd's keep-alive). A lease is marked lost, and its task ends, when ``refresh``
reports it gone (expired or revoked elsewhere), or when no refresh has succeeded for a whole
TTL (the store was unreachable: the backend has expired it, or is about to). Failed refreshes
are retried every ``ttl_s / 10`` until then.

Invariants: at most one task per lease id; ``stop`` and ``close`` cancel tasks and wait for them,
so no refresh runs after they return. Event-loop only; no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from .errors import MetadataStoreError

log = logging.getLogger(__name__)

Refresh = Callable[[int], Awaitable[bool]]
"""Refresh lease ``id``; True if it is still live, False if it is gone; raises
``MetadataStoreError`` when the store cannot be reached."""


class Lease:
    """A granted lease. ``lost`` turns True (and ``wait_lost`` returns) when its keep-alive
    learns it has expired; a lease granted without keep-alive is never marked."""

    __slots__ = ("_lost", "id", "ttl_s")

    def __init__(self, lease_id: int, ttl_s: float) -> None:
        self.id = lease_id
        self.ttl_s = ttl_s
        self._lost = asyncio.Event()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    def mark_lost(self) -> None:
        self._lost.set()

    def __repr__(self) -> str:
        return f"Lease(id={self.id}, ttl_s={self.ttl_s}, lost={self.lost})"


class LeaseKeeper:
    """Keep-alive tasks of one store's leases."""

    def __init__(self, refresh: Refresh) -> None:
        self._refresh = refresh
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def start(self, lease: Lease) -> None:
        if lease.id in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(
            self._keep_alive(lease), name=f"lease-keep-alive-{lease.id}"
        )
        self._tasks[lease.id] = task
        task.add_done_callback(lambda _: self._forget(lease.id, task))

    async def stop(self, lease_id: int) -> None:
        task = self._tasks.pop(lease_id, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        for lease_id in list(self._tasks):
            await self.stop(lease_id)

    def _forget(self, lease_id: int, task: asyncio.Task[None]) -> None:
        if self._tasks.get(lease_id) is task:
            del self._tasks[lease_id]

    async def _keep_alive(self, lease: Lease) -> None:
        loop = asyncio.get_running_loop()
        interval = lease.ttl_s / 3
        retry = lease.ttl_s / 10
        deadline = loop.time() + lease.ttl_s
        while True:
            await asyncio.sleep(max(0.0, min(interval, deadline - loop.time())))
            started = loop.time()
            try:
                async with asyncio.timeout(max(retry, deadline - started)):
                    live = await self._refresh(lease.id)
            except (MetadataStoreError, TimeoutError) as exc:
                if loop.time() >= deadline:
                    log.warning("lease %d lost: no keep-alive for its TTL (%s)", lease.id, exc)
                    lease.mark_lost()
                    return
                log.info("lease %d keep-alive failed, retrying: %s", lease.id, exc)
                interval = retry
                continue
            if not live:
                log.warning("lease %d lost: expired or revoked in the store", lease.id)
                lease.mark_lost()
                return
            deadline = started + lease.ttl_s
            interval = lease.ttl_s / 3
