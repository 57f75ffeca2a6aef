"""Contract: get / put / compare-and-set / delete / transaction / list, on both backends."""

from __future__ import annotations

import asyncio

import pytest

from strata.metadata import Compare, Delete, Entry, MetadataStore, Put

from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def test_put_and_get(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(10):
        assert await store.get(prefix + "a") is None
        first = await store.put(prefix + "a", b"one")
        assert first > 0
        entry = await store.get(prefix + "a")
        assert entry is not None
        assert entry == Entry(prefix + "a", b"one", first, None)
        second = await store.put(prefix + "a", b"two")
        assert second > first
        assert await store.get(prefix + "a") == Entry(prefix + "a", b"two", second, None)


async def test_compare_and_set(store: MetadataStore, prefix: str) -> None:
    key = prefix + "partition-0"
    async with asyncio.timeout(10):
        created = await store.compare_and_set(key, b"leader=1", version=0)
        assert created is not None
        assert await store.compare_and_set(key, b"leader=2", version=0) is None  # exists now
        updated = await store.compare_and_set(key, b"leader=2", version=created)
        assert updated is not None and updated > created
        assert await store.compare_and_set(key, b"leader=3", version=created) is None  # stale
        entry = await store.get(key)
        assert entry is not None and (entry.value, entry.version) == (b"leader=2", updated)


async def test_delete(store: MetadataStore, prefix: str) -> None:
    key = prefix + "k"
    async with asyncio.timeout(10):
        assert await store.delete(key) is False
        version = await store.put(key, b"v")
        assert await store.delete(key, version=version + 1000) is False
        assert await store.get(key) is not None
        assert await store.delete(key, version=version) is True
        assert await store.get(key) is None
        await store.put(key, b"v")
        assert await store.delete(key) is True
        assert await store.delete(key) is False


async def test_transaction_is_fenced_by_the_controller_epoch(
    store: MetadataStore, prefix: str
) -> None:
    """KAFKA-6082's rule: a controller write carries a compare on the epoch key, so a deposed
    controller's write fails as a whole and names the epoch as the conflict."""
    epoch_key, state_key, other_key = prefix + "controller_epoch", prefix + "p0", prefix + "p1"
    async with asyncio.timeout(10):
        epoch = await store.compare_and_set(epoch_key, b"1", version=0)
        assert epoch is not None
        state = await store.put(state_key, b"leader=1")
        result = await store.transaction(
            [Compare(epoch_key, epoch), Compare(state_key, state), Compare(other_key, 0)],
            [Put(state_key, b"leader=2"), Put(other_key, b"leader=2")],
        )
        assert result.succeeded and result.conflicts == ()
        a, b = await store.get(state_key), await store.get(other_key)
        assert a is not None and b is not None
        assert a.version == b.version == result.revision  # one revision for the whole txn

        # Another controller takes over: bumps the epoch.
        assert await store.compare_and_set(epoch_key, b"2", version=epoch) is not None
        _, revision_before = await store.list(prefix)
        fenced = await store.transaction(
            [Compare(epoch_key, epoch), Compare(state_key, a.version)],
            [Put(state_key, b"leader=zombie"), Delete(other_key)],
        )
        assert not fenced.succeeded
        assert fenced.conflicts == (epoch_key,)
        entries, revision_after = await store.list(prefix)
        assert revision_after == revision_before  # a failed txn writes nothing
        assert {e.key: e.value for e in entries}[state_key] == b"leader=2"
        assert any(e.key == other_key for e in entries)


async def test_transaction_conflicts_name_every_failed_compare(
    store: MetadataStore, prefix: str
) -> None:
    async with asyncio.timeout(10):
        version = await store.put(prefix + "a", b"1")
        result = await store.transaction(
            [Compare(prefix + "a", version), Compare(prefix + "b", 7), Compare(prefix + "c", 0)],
            [Put(prefix + "c", b"x")],
        )
        assert (result.succeeded, result.conflicts) == (False, (prefix + "b",))
        assert await store.get(prefix + "c") is None


async def test_transaction_of_deletes_only_and_refusals(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(10):
        await store.put(prefix + "a", b"1")
        await store.put(prefix + "b", b"2")
        result = await store.transaction([], [Delete(prefix + "a"), Delete(prefix + "b")])
        assert result.succeeded
        assert await store.list(prefix) == ([], result.revision)
        with pytest.raises(ValueError, match="twice"):
            await store.transaction([], [Put(prefix + "a", b"1"), Delete(prefix + "a")])
        with pytest.raises(ValueError, match="non-empty"):
            await store.put("", b"x")


async def test_list_is_sorted_by_key_at_a_revision(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(10):
        for name in ["b", "a/2", "c", "a/10", "a"]:
            await store.put(prefix + name, name.encode())
        await store.put(prefix[:-1] + "x", b"outside")  # shares the prefix minus its slash
        entries, revision = await store.list(prefix)
        assert [e.key for e in entries] == [prefix + k for k in ["a", "a/10", "a/2", "b", "c"]]
        assert revision >= max(e.version for e in entries)
        sub, _ = await store.list(prefix + "a/")
        assert [e.value for e in sub] == [b"a/10", b"a/2"]

        # A watch from the list's revision sees exactly what changed after it.
        pump = EventPump(store.watch(prefix, from_revision=revision))
        try:
            await store.delete(prefix + "b")
            event = await pump.next()
            assert (event.kind.value, event.key) == ("DELETE", prefix + "b")
            await pump.expect_quiet(0.1)
        finally:
            await pump.close()
