"""``LeaseKeeper``: keep-alive every TTL/3 from our own task, lost when the store says so or
when no refresh succeeded for a whole TTL, stopped on ``stop``/``close``."""

from __future__ import annotations

import asyncio

from strata.metadata import Lease, StoreUnavailableError
from strata.metadata.leases import LeaseKeeper


class FakeStore:
    def __init__(self) -> None:
        self.calls: list[float] = []
        self.live = True
        self.reachable = True
        self._called = asyncio.Condition()

    async def refresh(self, lease_id: int) -> bool:
        self.calls.append(asyncio.get_running_loop().time())
        async with self._called:
            self._called.notify_all()
        if not self.reachable:
            raise StoreUnavailableError("down")
        return self.live

    async def wait_calls(self, count: int) -> None:
        async with self._called:
            await self._called.wait_for(lambda: len(self.calls) >= count)


def keeping(lease_id: int, ttl_s: float, *, live: bool = True,
            reachable: bool = True) -> tuple[FakeStore, LeaseKeeper, Lease]:
    """A lease kept alive against a ``FakeStore`` that answers ``live`` or is unreachable."""
    store = FakeStore()
    store.live, store.reachable = live, reachable
    keeper = LeaseKeeper(store.refresh)
    lease = Lease(lease_id, ttl_s)
    keeper.start(lease)
    return store, keeper, lease


async def test_refreshes_every_third_of_the_ttl_until_stopped() -> None:
    store, keeper, lease = keeping(1, 0.3)
    keeper.start(lease)  # once per lease
    async with asyncio.timeout(2):
        await store.wait_calls(4)
    await keeper.stop(1)
    calls = len(store.calls)
    gaps = [b - a for a, b in zip(store.calls, store.calls[1:], strict=False)]
    assert all(0.08 <= gap <= 0.2 for gap in gaps), gaps
    await asyncio.sleep(0.25)
    assert len(store.calls) == calls  # stopped
    assert not lease.lost


async def test_lost_when_the_store_says_the_lease_is_gone() -> None:
    store, keeper, lease = keeping(2, 0.3, live=False)
    async with asyncio.timeout(2):
        await lease.wait_lost()
    assert len(store.calls) == 1
    await keeper.close()


async def test_lost_after_a_whole_ttl_without_a_successful_refresh() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    store, keeper, lease = keeping(3, 0.3, reachable=False)
    async with asyncio.timeout(2):
        await lease.wait_lost()
    assert 0.3 <= loop.time() - started < 0.6
    assert len(store.calls) >= 3  # retried every TTL/10 after the first failure
    await keeper.close()


async def test_a_store_that_comes_back_in_time_keeps_the_lease() -> None:
    store, keeper, lease = keeping(4, 0.4, reachable=False)
    async with asyncio.timeout(2):
        await store.wait_calls(2)
        store.reachable = True
        await asyncio.sleep(0.6)
    assert not lease.lost
    await keeper.close()
