"""SQLite leases on an injected clock: expiry is decided by the clock the store is given (the
wall clock by default), so it is exact and needs no waiting for TTLs in tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from strata.metadata import EventKind, LeaseNotFoundError
from strata.metadata.sqlite_store import SqliteStore

from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def sqlite_store(tmp_path: Path, clock: ManualClock,
                       housekeeping_interval_s: float) -> AsyncIterator[SqliteStore]:
    """A store in ``tmp_path`` on ``clock``, closed afterwards; the block is bounded to 10 s."""
    store = SqliteStore(str(tmp_path / "meta.db"), clock=clock,
                        housekeeping_interval_s=housekeeping_interval_s)
    try:
        async with asyncio.timeout(10):
            yield store
    finally:
        await store.close()


async def test_leases_expire_when_the_clock_passes_their_ttl(tmp_path: Path) -> None:
    clock = ManualClock()
    async with sqlite_store(tmp_path, clock, 0.01) as store:
        lease = await store.grant_lease(30, keep_alive=False)
        version = await store.put("/brokers/1", b"b1", lease=lease.id)
        pump = EventPump(store.watch("/brokers/", from_revision=version))
        try:
            clock.now += 29.9
            await pump.expect_quiet(0.1)
            assert await store._refresh(lease.id)  # keep-alive: 30 s from now again
            clock.now += 29.9
            await pump.expect_quiet(0.1)
            clock.now += 0.1
            event = await pump.next()
            assert (event.kind, event.key) == (EventKind.DELETE, "/brokers/1")
        finally:
            await pump.close()
        assert not await store._refresh(lease.id)
        with pytest.raises(LeaseNotFoundError):
            await store.put("/brokers/1", b"b1", lease=lease.id)


async def test_an_expired_lease_cannot_be_used_before_it_is_reaped(tmp_path: Path) -> None:
    clock = ManualClock()
    # No housekeeping during the test: expiry is still enforced at use.
    async with sqlite_store(tmp_path, clock, 3600) as store:
        lease = await store.grant_lease(5, keep_alive=False)
        clock.now += 5
        with pytest.raises(LeaseNotFoundError):
            await store.put("/k", b"v", lease=lease.id)
        assert not await store._refresh(lease.id)
