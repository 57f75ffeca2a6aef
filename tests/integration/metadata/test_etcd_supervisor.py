"""The etcd supervisor: restarts, failover between endpoints, an unreachable etcd.

The restart case: etcd gets SIGKILL, stays down 2 s, and a new etcd starts on the same data dir
and ports (what a crashed and restarted member looks like to clients). Meanwhile a write is in
flight (the session retries it until etcd answers), and writes go on right after the restart,
while the watch is still reconnecting — the re-watch from the last revision seen must deliver
them all, in order, exactly once. Runs on an etcd of its own so the shared one is undisturbed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.metadata import EventKind, StoreUnavailableError, open_store
from strata.metadata.etcd_store import EtcdStore

from .etcd_process import EtcdProcess, free_port, running_etcd
from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

OUTAGE_S = 2.0


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    with running_etcd(tmp_path) as process:
        yield process


async def test_watch_survives_an_etcd_restart(
    own_etcd: EtcdProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="strata.metadata")
    prefix = "/restart/"
    watching, writing = open_store(own_etcd.url), open_store(own_etcd.url)
    try:
        async with asyncio.timeout(40):
            _, start = await watching.list(prefix)
            pump = EventPump(watching.watch(prefix, from_revision=start))
            try:
                written = [await writing.put(f"{prefix}{i:02d}", b"before") for i in range(5)]
                assert [e.revision for e in await pump.take(5)] == written

                own_etcd.kill()
                in_flight = asyncio.create_task(writing.put(f"{prefix}05", b"during"))
                await asyncio.sleep(OUTAGE_S)  # the outage itself
                assert not in_flight.done()
                own_etcd.start()
                written.append(await in_flight)
                written += [await writing.put(f"{prefix}{i:02d}", b"after") for i in range(6, 20)]
                assert await writing.delete(f"{prefix}00")
                written.append((await writing.list(prefix))[1])

                events = await pump.take(len(written) - 5, timeout_s=20)
                assert [e.revision for e in events] == written[5:]
                assert [e.key for e in events[:-1]] == [f"{prefix}{i:02d}" for i in range(5, 20)]
                assert (events[-1].kind, events[-1].key) == (EventKind.DELETE, f"{prefix}00")
                await pump.expect_quiet(0.2)  # and nothing repeated
                assert any("re-watching" in r.getMessage() for r in caplog.records)
            finally:
                await pump.close()
    finally:
        await watching.close()
        await writing.close()


async def test_a_dead_endpoint_fails_over_to_the_next(etcd: EtcdProcess) -> None:
    url = f"etcd://127.0.0.1:{free_port()},127.0.0.1:{etcd.client_port}"
    store = open_store(url)
    try:
        async with asyncio.timeout(10):
            version = await store.put("/failover/k", b"v")
            entry = await store.get("/failover/k")
            assert entry is not None and entry.version == version
    finally:
        await store.close()


async def test_an_unreachable_etcd_raises_within_the_retry_deadline() -> None:
    store = EtcdStore((("127.0.0.1", free_port()),), retry_deadline_s=0.5)
    try:
        async with asyncio.timeout(10):
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(StoreUnavailableError, match=r"within 0\.5 s"):
                await store.get("/k")
            assert loop.time() - started < 3
    finally:
        await store.close()
