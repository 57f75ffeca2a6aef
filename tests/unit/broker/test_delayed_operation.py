"""Purgatory and DelayedFetch: woken by notify, expire on time, leave nothing behind."""

from __future__ import annotations

import asyncio

from strata.broker.replication.delayed_operation import DelayedFetch, Purgatory


async def test_notify_wakes_every_watcher_of_the_key_only() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    a = asyncio.create_task(purgatory.wait(["x", "y"], 5))
    b = asyncio.create_task(purgatory.wait(["x"], 5))
    c = asyncio.create_task(purgatory.wait(["z"], 0.05))
    await asyncio.sleep(0)
    assert purgatory.watched("x") == 2 and len(purgatory) == 3
    assert purgatory.notify("x") == 2
    assert await a is True and await b is True
    assert await c is False  # expired
    assert len(purgatory) == 0 and purgatory.watched("y") == 0
    assert purgatory.notify("x") == 0


async def test_cancelled_waiter_is_removed() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    task = asyncio.create_task(purgatory.wait(["x"], 5))
    await asyncio.sleep(0)
    assert purgatory.watched("x") == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(purgatory) == 0


async def test_zero_timeout_does_not_register() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    assert await purgatory.wait(["x"], 0) is False
    assert len(purgatory) == 0


async def test_delayed_fetch_completes_when_condition_holds() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    available = [0]
    calls = [0]

    def try_complete() -> str | None:
        calls[0] += 1
        return "done" if available[0] >= 2 else None

    op = DelayedFetch(["p"], 5000, try_complete, lambda: "expired")
    task = asyncio.create_task(op.run(purgatory))
    await asyncio.sleep(0)
    available[0] = 1
    purgatory.notify("p")  # not enough yet: waits again
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not task.done() and calls[0] == 1
    available[0] = 2
    purgatory.notify("p")
    assert await asyncio.wait_for(task, 1) == "done"
    assert calls[0] == 2


async def test_delayed_fetch_expires() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    loop = asyncio.get_running_loop()
    start = loop.time()
    op = DelayedFetch(["p"], 50, lambda: None, lambda: "expired")
    assert await op.run(purgatory) == "expired"
    assert 0.04 <= loop.time() - start < 1
    assert len(purgatory) == 0


async def test_wait_any_is_one_registration_told_every_key_notified_until_it_ends() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    keys = frozenset(f"p{i}" for i in range(1000))
    task = asyncio.create_task(purgatory.wait_any(keys, 5))
    plain = asyncio.create_task(purgatory.wait(["p7"], 5))
    await asyncio.sleep(0)
    assert len(purgatory) == 2 and purgatory.watched("p7") == 2
    assert purgatory.notify("elsewhere") == 0
    assert purgatory.notify("p7") == 2
    # Notified after the wake-up but before the waiter ran: still told, so none is missed.
    assert purgatory.notify("p3") == 0
    purgatory.notify("p7")
    assert await task == ["p7", "p3", "p7"]
    assert await plain is True
    assert len(purgatory) == 0 and purgatory.watched("p7") == 0


async def test_wait_any_expires_and_is_removed_when_cancelled() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    assert await purgatory.wait_any({"x"}, 0.01) == []
    assert await purgatory.wait_any({"x"}, 0) == []
    task = asyncio.create_task(purgatory.wait_any({"x"}, 5))
    await asyncio.sleep(0)
    assert purgatory.watched("x") == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(purgatory) == 0 and purgatory.notify("x") == 0


def test_the_journal_tells_every_key_notified_since_a_position() -> None:
    purgatory: Purgatory[str] = Purgatory("Fetch", journal=True, journal_size=4)
    start = purgatory.position
    for key in "abca":
        purgatory.notify(key)
    assert purgatory.notified_since(start) == list("abca")
    middle = purgatory.position
    purgatory.notify("d")
    assert purgatory.notified_since(middle) == ["d"]
    for key in "efgh":  # past twice its size the journal drops its oldest half
        purgatory.notify(key)
    assert purgatory.notified_since(start) is None  # some were dropped: the reader must assume
    assert purgatory.notified_since(middle + 1) == list("efgh")
    assert Purgatory[str]("Produce").notified_since(0) is None  # no journal kept
