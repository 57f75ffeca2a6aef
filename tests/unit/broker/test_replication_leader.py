"""The leader's side of replication: follower fetch state, the high watermark over the ISR,
acks=-1 produces waiting for it, ISR shrink and expansion, leadership loss while waiting."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from strata.broker.replication.follower_state import FollowerState
from strata.broker.replication.partition import FetchIsolation, Partition
from strata.broker.replication.partition_results import PartitionFetchInfo
from strata.broker.replication.replica_manager import ReplicaManager
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import batch, log_manager, now_ms

TOPIC_ID = uuid.UUID(int=7)
TP = ("t", 0)
LAG_MS = 10_000


# -------------------------------------------------------------------------- FollowerState
@pytest.mark.parametrize(
    ("fetch_offset", "leader_end", "expected_caught_up"),
    [
        (10, 10, 5_000),  # at the leader's end: caught up now
        (12, 10, 5_000),  # (cannot pass it, but counts as at the end)
        (8, 10, 2_000),   # has what the leader had at the previous fetch (8): caught up then
        (7, 10, 1_000),   # behind even that: no change
    ],
)
def test_caught_up_time(fetch_offset: int, leader_end: int, expected_caught_up: int) -> None:
    state = FollowerState.reset(2, now_ms=1_000).on_fetch(5, 8, now_ms=2_000)
    assert state.last_caught_up_ms == 1_000  # 5 < 8 and no previous fetch: unchanged
    after = state.on_fetch(fetch_offset, leader_end, now_ms=5_000)
    assert (after.log_end_offset, after.last_caught_up_ms) == (fetch_offset, expected_caught_up)
    assert after.last_fetch_leader_log_end_offset == leader_end


def test_in_sync_within_the_lag_or_at_the_end() -> None:
    state = FollowerState.reset(2, now_ms=0).on_fetch(3, 9, now_ms=100)
    assert state.is_caught_up(9, now_ms=LAG_MS, max_lag_ms=LAG_MS)
    assert not state.is_caught_up(9, now_ms=LAG_MS + 1, max_lag_ms=LAG_MS)
    assert state.on_fetch(9, 9, now_ms=LAG_MS + 5).is_caught_up(9, LAG_MS + 5, LAG_MS)


# -------------------------------------------------------------------------- ReplicaManager
@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms())  # record timestamps are validated against it


@pytest.fixture
def rm(tmp_path: Path, clock: ManualClock) -> ReplicaManager:
    """Broker 1 leads t-0 with replicas 1, 2, 3 (all in the ISR), min.insync.replicas 2."""
    manager = ReplicaManager(log_manager(tmp_path, clock, min_insync_replicas="2"), clock, 1)
    manager.make_leader("t", 0, TOPIC_ID, 0, replicas=(1, 2, 3), isr=frozenset((1, 2, 3)))
    return manager


def part(rm: ReplicaManager) -> Partition:
    found = rm.get_partition(*TP)
    assert found is not None
    return found


async def follower_fetch(rm: ReplicaManager, replica: int, offset: int) -> int:
    """A follower's fetch from ``offset``; the HW it learns."""
    (result,) = await rm.fetch_messages([(TP, PartitionFetchInfo(offset, 1 << 20))],
                                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                        isolation=FetchIsolation.LOG_END, replica_id=replica)
    assert result.error_code == 0, result
    return result.high_watermark


async def produce(rm: ReplicaManager, acks: int, timeout_ms: int = 5_000,
                  value: bytes = b"v") -> tuple[int, int]:
    (result,) = await rm.append_records([(TP, batch(value))], acks, timeout_ms)
    return result.error_code, result.base_offset


async def test_high_watermark_is_the_smallest_log_end_of_the_isr(rm: ReplicaManager) -> None:
    for _ in range(3):
        assert (await produce(rm, 1))[0] == 0
    assert part(rm).high_watermark == 0  # followers have nothing yet
    assert await follower_fetch(rm, 2, 3) == 0  # follower 3 still has nothing
    assert await follower_fetch(rm, 3, 2) == 2
    assert await follower_fetch(rm, 3, 3) == 3
    assert part(rm).followers[3].log_end_offset == 3


async def test_acks_all_waits_for_the_isr(rm: ReplicaManager) -> None:
    waiting = asyncio.create_task(produce(rm, -1))
    await asyncio.sleep(0)  # let the produce append and start waiting
    assert not waiting.done() and part(rm).log_end_offset == 1
    await follower_fetch(rm, 2, 1)
    assert not waiting.done()  # follower 3 is in the ISR and has not fetched it
    await follower_fetch(rm, 3, 1)
    assert await asyncio.wait_for(waiting, 5) == (0, 0)


async def test_acks_all_times_out_and_acks_one_does_not_wait(rm: ReplicaManager) -> None:
    assert await produce(rm, -1, timeout_ms=50) == (ErrorCode.request_timed_out, -1)
    assert await produce(rm, 1) == (0, 1)  # the timed-out records stay in the log
    assert part(rm).log_end_offset == 2


async def test_lagging_follower_is_shrunk_out_and_the_waiting_produce_completes(
    rm: ReplicaManager, clock: ManualClock
) -> None:
    waiting = asyncio.create_task(produce(rm, -1, timeout_ms=60_000))
    await asyncio.sleep(0)
    await follower_fetch(rm, 2, 1)
    assert rm.maybe_shrink_isr(LAG_MS) == 0  # nobody has lagged long enough yet
    clock.advance(LAG_MS + 1)
    await follower_fetch(rm, 2, 1)  # 2 keeps fetching at the end; 3 is silent
    assert rm.maybe_shrink_isr(LAG_MS) == 1
    assert part(rm).isr == {1, 2}
    assert await asyncio.wait_for(waiting, 5) == (0, 0)


async def test_isr_below_min_insync(rm: ReplicaManager, clock: ManualClock) -> None:
    clock.advance(LAG_MS + 1)
    assert rm.maybe_shrink_isr(LAG_MS) == 1  # both followers silent since the election
    assert part(rm).isr == {1}
    assert (await produce(rm, -1))[0] == ErrorCode.not_enough_replicas
    assert part(rm).log_end_offset == 0  # nothing appended
    assert (await produce(rm, 1))[0] == 0  # acks=1 does not need the ISR


async def test_follower_rejoins_the_isr_once_caught_up(rm: ReplicaManager,
                                                       clock: ManualClock) -> None:
    await produce(rm, 1)
    await produce(rm, 1)
    clock.advance(LAG_MS + 1)
    await follower_fetch(rm, 2, 2)
    rm.maybe_shrink_isr(LAG_MS)
    assert part(rm).isr == {1, 2} and part(rm).high_watermark == 2
    await follower_fetch(rm, 3, 1)
    assert part(rm).isr == {1, 2}  # below the HW: not in sync yet
    await follower_fetch(rm, 3, 2)
    assert part(rm).isr == {1, 2, 3}


async def test_pending_isr_change_counts_an_expansion_for_the_hw(tmp_path: Path,
                                                                clock: ManualClock) -> None:
    proposals: list[frozenset[int]] = []
    manager = ReplicaManager(log_manager(tmp_path, clock), clock, 1,
                             isr_change_handler=lambda _p, isr: proposals.append(isr))
    manager.make_leader("t", 0, TOPIC_ID, 0, replicas=(1, 2), isr=frozenset((1,)))
    await produce(manager, 1)
    assert part(manager).high_watermark == 1  # ISR {1}
    await produce(manager, 1)
    await follower_fetch(manager, 2, 1)  # its log end 1 is below the HW 2: not in sync
    assert proposals == []
    await follower_fetch(manager, 2, 2)
    assert proposals == [{1, 2}] and part(manager).isr == {1}
    await produce(manager, 1)
    assert part(manager).high_watermark == 2  # waits for 2, which the ISR is about to include
    assert part(manager).maybe_shrink_isr(clock.milliseconds(), LAG_MS) is None  # one at a time
    manager.apply_isr_change(part(manager), frozenset((1, 2)), 1)
    assert (part(manager).isr, part(manager).partition_epoch) == ({1, 2}, 1)
    part(manager).abort_isr_change()  # nothing pending: harmless


async def test_losing_leadership_answers_waiting_produces(rm: ReplicaManager) -> None:
    waiting = asyncio.create_task(produce(rm, -1, timeout_ms=60_000))
    await asyncio.sleep(0)
    rm.make_follower("t", 0, TOPIC_ID, 2, 1, replicas=(1, 2, 3), isr=frozenset((2, 3)),
                     partition_epoch=1)
    assert (await asyncio.wait_for(waiting, 5))[0] == ErrorCode.not_leader_or_follower
    assert (await produce(rm, 1))[0] == ErrorCode.not_leader_or_follower


async def test_fetch_from_a_broker_that_is_not_a_replica(rm: ReplicaManager) -> None:
    (result,) = await rm.fetch_messages([(TP, PartitionFetchInfo(0, 1 << 20))],
                                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                        isolation=FetchIsolation.LOG_END, replica_id=9)
    assert result.error_code == ErrorCode.not_leader_or_follower
