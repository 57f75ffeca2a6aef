"""A broker that loses its registration lease leads nothing until it is registered again:
its broker epoch drops to 0 and ``on_lease_lost`` runs (the cluster re-publishes its image, so
every partition the image still names it leader of becomes leaderless here) before it
registers anew at a larger epoch."""

from __future__ import annotations

import asyncio
from typing import Any

from strata.broker.cluster.broker_lifecycle import BrokerLifecycle
from strata.broker.cluster.image import BrokerRegistration
from strata.metadata.leases import Lease


class FakeStore:
    """Grants leases and versions registrations; nothing else is asked of it here."""

    def __init__(self) -> None:
        self.leases: list[Lease] = []
        self.version = 40
        self.registered_again = asyncio.Event()

    async def grant_lease(self, ttl_s: float) -> Lease:
        self.leases.append(Lease(len(self.leases) + 1, ttl_s))
        return self.leases[-1]

    async def put(self, key: str, value: bytes, *, lease: int | None = None) -> int:
        self.version += 1
        if self.version > 41:
            self.registered_again.set()
        return self.version


async def test_a_lost_lease_drops_the_epoch_and_resigns_before_registering_again() -> None:
    store = FakeStore()
    lifecycle = BrokerLifecycle(store, cache=Any,  # type: ignore[arg-type]  # unused here
                                registration=BrokerRegistration(0, "h", 9092),
                                session_timeout_s=6.0, on_fenced=lambda: None)
    seen: list[int] = []
    resigned = asyncio.Event()

    async def on_lease_lost() -> None:
        seen.append(lifecycle.epoch)
        resigned.set()

    lifecycle.on_lease_lost = on_lease_lost
    assert await lifecycle.register() == 41
    store.leases[0].mark_lost()
    async with asyncio.timeout(5):
        await resigned.wait()
        assert seen == [0]  # resigned at broker epoch 0, before the new registration
        await store.registered_again.wait()
    # The put does not suspend, so register() has set the epoch before this test resumes.
    assert lifecycle.epoch == 42 and len(store.leases) == 2
    lifecycle._stopped = True  # end the registration task
    store.leases[1].mark_lost()
