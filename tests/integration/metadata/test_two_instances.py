"""Contract: several store instances on one URL — in this process and in other processes
(for SQLite, that is the point: brokers of one host share the file) — see each other's writes,
watches and lease expiry, and compare-and-set races have exactly one winner."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from strata.metadata import EventKind, MetadataStore

from .helpers import EventPump, Peer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

Opener = Callable[[], Awaitable[MetadataStore]]


async def test_another_instance_sees_writes_and_watch_events(
    store: MetadataStore, open_stores: Opener, prefix: str
) -> None:
    other = await open_stores()
    async with asyncio.timeout(10):
        _, start = await store.list(prefix)
        pump = EventPump(other.watch(prefix, from_revision=start))
        try:
            version = await store.put(prefix + "k", b"v")
            entry = await other.get(prefix + "k")
            assert entry is not None and entry.version == version
            event = await pump.next()
            assert (event.key, event.revision) == (prefix + "k", version)
        finally:
            await pump.close()


async def test_another_process_sees_writes_and_we_see_its_watch(
    store: MetadataStore, store_url: str, prefix: str
) -> None:
    async with asyncio.timeout(20):
        _, start = await store.list(prefix)
        watcher = await Peer.start("watch", store_url, prefix, str(start), "3")
        try:
            assert await watcher.read() == "ready"
            versions = [await store.put(prefix + f"k{i}", b"%d" % i) for i in range(3)]
            seen = [await watcher.read() for _ in range(3)]
            assert seen == [["PUT", prefix + f"k{i}", str(i), versions[i]] for i in range(3)]
            assert await watcher.wait() == 0
        finally:
            await watcher.stop()


async def test_compare_and_set_race_across_processes_has_one_winner(
    store: MetadataStore, store_url: str, prefix: str
) -> None:
    count = 200
    async with asyncio.timeout(30):
        _, start = await store.list(prefix)
        peer = await Peer.start("race", store_url, prefix, str(count))
        pump = EventPump(store.watch(prefix, from_revision=start))
        try:
            assert await peer.read() == "ready"
            await peer.send("go")
            await pump.next()  # the peer has begun
            # Both sides try every key, each in its own random order, so keys are contested
            # in an order neither controls.
            ours = [
                i
                for i in random.sample(range(count), count)
                if await store.compare_and_set(f"{prefix}{i}", b"main", version=0) is not None
            ]
            theirs = (await peer.read())["won"]
        finally:
            await pump.close()
            await peer.stop()
        assert sorted(ours + theirs) == list(range(count))  # every key won exactly once
        # How the keys split is not asserted: SQLite's lock is not fair between processes (a
        # writer that re-takes it at once can starve a busy-waiting one for the whole race), and
        # etcd orders by arrival; exclusivity is the contract, not a share.
        entries, _ = await store.list(prefix)
        winner = {int(e.key.removeprefix(prefix)): e.value for e in entries}
        assert all(winner[i] == b"main" for i in ours)
        assert all(winner[i] == b"peer" for i in theirs)


async def test_concurrent_increments_lose_no_update(
    store: MetadataStore, open_stores: Opener, store_url: str, prefix: str
) -> None:
    """Read-modify-write by compare-and-set from another process, another instance and this
    one at once: the counter ends at the sum of all increments."""
    key, per_writer = prefix + "counter", 40
    other = await open_stores()

    async def increment(target: MetadataStore) -> None:
        for _ in range(per_writer):
            while True:
                entry = await target.get(key)
                assert entry is not None
                new = str(int(entry.value) + 1).encode()
                if await target.compare_and_set(key, new, version=entry.version) is not None:
                    break

    async with asyncio.timeout(40):
        await store.put(key, b"0")
        peer = await Peer.start("increment", store_url, key, str(per_writer))
        try:
            assert await peer.read() == "ready"
            await peer.send("go")
            await asyncio.gather(increment(store), increment(other))
            await peer.read(timeout_s=30)
        finally:
            await peer.stop()
        entry = await store.get(key)
        assert entry is not None and int(entry.value) == 3 * per_writer


async def test_a_killed_process_loses_its_leased_key(
    store: MetadataStore, store_url: str, prefix: str
) -> None:
    """A broker killed with SIGKILL stops its keep-alive; the lease runs out and its key is
    deleted (on SQLite, reaped by this process's store)."""
    async with asyncio.timeout(20):
        holder = await Peer.start("hold-lease", store_url, prefix + "brokers/7", "1")
        try:
            held = await holder.read()
            pump = EventPump(store.watch(prefix, from_revision=held["version"]))
            try:
                await pump.expect_quiet(1.5)  # kept alive past its TTL while the holder lives
                entry = await store.get(prefix + "brokers/7")
                assert entry is not None and entry.lease == held["lease"]
                holder.kill()
                event = await pump.next(timeout_s=8)
                assert (event.kind, event.key) == (EventKind.DELETE, prefix + "brokers/7")
            finally:
                await pump.close()
        finally:
            await holder.stop()
