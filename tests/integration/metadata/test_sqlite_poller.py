"""The SQLite watch poller reads the events table only when the file changed.

``SqliteStore`` polls every 5 ms while a watch is open; each poll first asks its own read-only
connection for ``PRAGMA data_version`` and skips the read on the store's thread when nothing
was committed since the last read. These tests hold the two sides of that: an idle store does
(almost) no reads, and no write is missed — from this instance, from another instance on the
same file, or in a burst longer than one read's batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from strata.metadata.sqlite_db import SqliteDb
from strata.metadata.sqlite_store import _BATCH, SqliteStore

from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

IDLE_WINDOW_S = 0.5  # 100 polls at the 5 ms interval


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, SqliteStore]]:
    """Two instances on one file, as two brokers of a host have."""
    path = str(tmp_path / "meta.db")
    first, second = SqliteStore(path), SqliteStore(path)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per read of the events table (``SqliteDb.events_after``), any instance."""
    seen: list[int] = []
    original: Callable[..., Any] = SqliteDb.events_after

    def counted(db: SqliteDb, last_id: int, limit: int) -> Any:
        seen.append(last_id)
        return original(db, last_id, limit)

    monkeypatch.setattr(SqliteDb, "events_after", counted)
    return seen


async def test_an_idle_watch_does_not_read_the_events_table(
        stores: tuple[SqliteStore, SqliteStore], reads: list[int]) -> None:
    store, _ = stores
    async with asyncio.timeout(10):
        _, start = await store.list("/idle/")
        pump = EventPump(store.watch("/idle/", from_revision=start))
        try:
            await store.put("/idle/k", b"v")  # the watch is open and has read once
            assert (await pump.next()).key == "/idle/k"
            before = len(reads)
            await pump.expect_quiet(IDLE_WINDOW_S)
            # Without the data_version check every 5 ms poll reads: ~100 in the window.
            assert len(reads) - before <= 2, f"{len(reads) - before} reads while idle"
        finally:
            await pump.close()


async def test_writes_from_either_instance_reach_the_watch_after_idling(
        stores: tuple[SqliteStore, SqliteStore]) -> None:
    store, other = stores
    async with asyncio.timeout(20):
        _, start = await store.list("/w/")
        pump = EventPump(store.watch("/w/", from_revision=start))
        try:
            for i in range(20):
                writer = store if i % 2 else other
                version = await writer.put(f"/w/k{i}", b"%d" % i)
                event = await pump.next()
                assert (event.key, event.revision) == (f"/w/k{i}", version)
                if i % 5 == 0:  # let the poller settle on the file's version in between
                    await pump.expect_quiet(0.02)
        finally:
            await pump.close()


async def test_a_burst_longer_than_one_read_is_delivered_whole_and_in_order(
        stores: tuple[SqliteStore, SqliteStore]) -> None:
    store, other = stores
    count = _BATCH + _BATCH // 2
    async with asyncio.timeout(40):
        _, start = await store.list("/b/")
        pump = EventPump(store.watch("/b/", from_revision=start))
        try:
            # One transaction per key would take long; puts from the other instance, awaited
            # together, commit back to back while the watcher's poller sleeps.
            versions = await asyncio.gather(*(other.put(f"/b/{i:05d}", b"x")
                                              for i in range(count)))
            events = await pump.take(count, timeout_s=30)
            assert [e.revision for e in events] == sorted(versions)
            assert len({e.key for e in events}) == count
        finally:
            await pump.close()
