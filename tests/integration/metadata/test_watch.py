"""Contract: watches — from a revision (history first, then live), prefix filtering, one
revision per transaction, compaction -> CompactedError."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from strata.metadata import CompactedError, Delete, EventKind, MetadataStore, Put

from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def test_watch_from_a_revision_replays_history_then_follows(
    store: MetadataStore, prefix: str
) -> None:
    async with asyncio.timeout(10):
        v1 = await store.put(prefix + "k1", b"1")
        v2 = await store.put(prefix + "k2", b"2")
        v3 = await store.put(prefix + "k1", b"1b")
        pump = EventPump(store.watch(prefix, from_revision=v1))
        try:
            history = await pump.take(2)
            assert [(e.key, e.value, e.revision) for e in history] == [
                (prefix + "k2", b"2", v2),
                (prefix + "k1", b"1b", v3),
            ]
            await store.put(prefix[:-1] + "-sibling", b"not ours")
            txn = await store.transaction([], [Put(prefix + "k3", b"3"), Delete(prefix + "k2")])
            live = await pump.take(2)
            assert [(e.kind, e.key, e.value, e.revision) for e in live] == [
                (EventKind.PUT, prefix + "k3", b"3", txn.revision),
                (EventKind.DELETE, prefix + "k2", b"", txn.revision),
            ]
            await pump.expect_quiet(0.1)
        finally:
            await pump.close()


async def test_watch_from_a_future_revision_waits_for_it(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(10):
        v1 = await store.put(prefix + "k", b"1")
        pump = EventPump(store.watch(prefix, from_revision=v1 + 1))
        try:
            await store.put(prefix + "k", b"2")  # revision v1 + 1 (no other writers of ours)
            v3 = await store.put(prefix + "k", b"3")
            event = await pump.next()
            assert event.revision > v1 + 1 and event.revision <= v3
        finally:
            await pump.close()


async def test_many_events_arrive_in_order(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(20):
        _, start = await store.list(prefix)
        pump = EventPump(store.watch(prefix, from_revision=start))
        try:
            versions = [await store.put(f"{prefix}{i:04d}", b"x") for i in range(300)]
            events = await pump.take(300, timeout_s=15)
            assert [e.revision for e in events] == versions
        finally:
            await pump.close()


async def test_compaction_makes_old_watches_fail_with_compacted_error(
    store: MetadataStore, prefix: str
) -> None:
    async with asyncio.timeout(10):
        versions = [await store.put(f"{prefix}k{i}", b"x") for i in range(4)]
        await store.compact(versions[1])

        old = store.watch(prefix, from_revision=versions[0])
        with pytest.raises(CompactedError) as raised:
            await anext(old)
        assert raised.value.compact_revision >= versions[1]
        with contextlib.suppress(Exception):
            await old.aclose()  # type: ignore[attr-defined]

        pump = EventPump(store.watch(prefix, from_revision=versions[1]))
        try:
            events = await pump.take(2)
            assert [e.revision for e in events] == versions[2:]
        finally:
            await pump.close()

        await store.compact(versions[0])  # older than the last compaction: nothing to do
        _, current = await store.list(prefix)
        with pytest.raises(ValueError):
            await store.compact(current + 10)
