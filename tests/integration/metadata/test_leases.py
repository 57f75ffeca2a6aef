"""Contract: leases — TTL expiry deletes the leased keys with DELETE events, keep-alive keeps
them past the TTL, revoke ends them at once. TTLs are 1 s (etcd's test minimum, see
``etcd_process``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from strata.metadata import EventKind, LeaseNotFoundError, MetadataStore

from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def test_lease_expiry_deletes_its_keys_with_events(store: MetadataStore, prefix: str) -> None:
    async with asyncio.timeout(15):
        lease = await store.grant_lease(1, keep_alive=False)
        assert lease.id > 0 and lease.ttl_s >= 1
        _, start = await store.list(prefix)
        v1 = await store.put(prefix + "brokers/1", b"b1", lease=lease.id)
        await store.put(prefix + "brokers/2", b"b2", lease=lease.id)
        await store.put(prefix + "topics/t", b"t")
        entry = await store.get(prefix + "brokers/1")
        assert entry is not None and (entry.version, entry.lease) == (v1, lease.id)

        pump = EventPump(store.watch(prefix, from_revision=start))
        try:
            puts = await pump.take(3)
            assert [e.kind for e in puts] == [EventKind.PUT] * 3
            deletes = await pump.take(2, timeout_s=8)  # TTL 1 s + the backend's expiry tick
            assert {(e.kind, e.key) for e in deletes} == {
                (EventKind.DELETE, prefix + "brokers/1"),
                (EventKind.DELETE, prefix + "brokers/2"),
            }
            assert deletes[0].revision == deletes[1].revision  # one revision per expired lease
        finally:
            await pump.close()
        entries, _ = await store.list(prefix)
        assert [e.key for e in entries] == [prefix + "topics/t"]
        with pytest.raises(LeaseNotFoundError):
            await store.put(prefix + "brokers/1", b"again", lease=lease.id)


async def test_keep_alive_keeps_the_key_past_its_ttl_and_revoke_ends_it(
    store: MetadataStore, prefix: str
) -> None:
    async with asyncio.timeout(15):
        lease = await store.grant_lease(1)
        version = await store.put(prefix + "controller", b"1", lease=lease.id)
        pump = EventPump(store.watch(prefix, from_revision=version))
        try:
            await pump.expect_quiet(2.5)  # 2.5 TTLs without a DELETE
            assert not lease.lost
            assert await store.get(prefix + "controller") is not None

            await store.revoke_lease(lease.id)
            event = await pump.next(timeout_s=5)
            assert (event.kind, event.key) == (EventKind.DELETE, prefix + "controller")
        finally:
            await pump.close()
        assert await store.get(prefix + "controller") is None
        await store.revoke_lease(lease.id)  # already gone: not an error


async def test_keep_alive_reports_a_lease_revoked_elsewhere(
    store: MetadataStore, open_stores: Callable[[], Awaitable[MetadataStore]], prefix: str
) -> None:
    other = await open_stores()
    async with asyncio.timeout(15):
        lease = await store.grant_lease(1)
        await store.put(prefix + "broker", b"1", lease=lease.id)
        await other.revoke_lease(lease.id)
        await asyncio.wait_for(lease.wait_lost(), 5)
        assert lease.lost
