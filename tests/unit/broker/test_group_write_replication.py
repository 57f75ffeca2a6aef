"""The group coordinator answers a write only once it is on the whole ISR of its partition.

A coordinator appends to its ``__consumer_offsets`` partition as the leader; an answer given
before the followers have the records would be an acknowledged commit that a failover of the
coordinator takes back (found by CI: a commit answered, the coordinator killed, the new one
served the old offsets). Here the group's partition is led with a second replica in its ISR that
fetches only when the test says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.replication.partition import Partition
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import add_topics, group_broker_state
from .test_group_handlers import call, commit_fields, fetch, join

FOLLOWER = 2
TP = (OFFSETS_TOPIC, 0)


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def replicated_state(tmp_path: Path, **config: str) -> BrokerState:
    """A coordinator whose one ``__consumer_offsets`` partition has ISR {1, FOLLOWER}."""
    state = group_broker_state(tmp_path, ManualClock(), offsets_topic_num_partitions="1",
                               **config)
    await add_topics(state, ("t", 2))
    await state.group_coordinator.startup(run_timers=False)
    found = await call(state, ApiKey.FIND_COORDINATOR, 2, key="g", key_type=0)
    assert found.error_code == ErrorCode.none
    record = state.topic_store.get(OFFSETS_TOPIC)
    assert record is not None
    state.replica_manager.make_leader(OFFSETS_TOPIC, 0, record.topic_id, 1,
                                      replicas=(1, FOLLOWER), isr=frozenset({1, FOLLOWER}))
    return state


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    state = await replicated_state(tmp_path)
    yield state
    await state.group_coordinator.shutdown()
    state.log_manager.shutdown()


def offsets_partition(state: BrokerState) -> Partition:
    partition = state.replica_manager.get_partition(*TP)
    assert partition is not None
    return partition


def waiting(state: BrokerState) -> int:
    return state.replica_manager.produce_purgatory.watched(TP)


def follower_fetches(state: BrokerState) -> None:
    """The follower fetches from the leader's log end: it has everything."""
    partition = offsets_partition(state)
    state.replica_manager.update_follower_fetch_state(partition, FOLLOWER,
                                                      partition.log_end_offset)


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


async def test_a_commit_is_answered_once_the_follower_has_it(state: BrokerState) -> None:
    commit = asyncio.create_task(call(state, ApiKey.OFFSET_COMMIT, 8,
                                      **commit_fields(8, ("t", 0, 11))))
    await until(lambda: waiting(state) == 1, "the commit to wait for the ISR")
    assert not commit.done()
    assert offsets_partition(state).high_watermark < offsets_partition(state).log_end_offset
    # A fetch of the group's offsets shows the commit only once it is replicated, too.
    fetched = asyncio.create_task(fetch(state, 5, [("t", [0])]))
    await until(lambda: waiting(state) == 2, "the offset fetch to wait for the ISR")
    assert not fetched.done()
    follower_fetches(state)
    assert partition_errors(await asyncio.wait_for(commit, 5)) == {("t", 0): ErrorCode.none}
    answer = await asyncio.wait_for(fetched, 5)
    assert answer.error_code == ErrorCode.none
    assert answer.topics[0].partitions[0].committed_offset == 11


async def test_a_commit_the_isr_does_not_take_in_time_is_not_acknowledged(
        tmp_path: Path) -> None:
    state = await replicated_state(tmp_path, offsets_commit_timeout_ms="50")
    try:
        response = await call(state, ApiKey.OFFSET_COMMIT, 8, **commit_fields(8, ("t", 0, 11)))
        assert partition_errors(response) == {("t", 0): ErrorCode.coordinator_not_available}
        unreplicated = await fetch(state, 5, [("t", [0])])
        assert unreplicated.error_code == ErrorCode.coordinator_not_available
        assert unreplicated.topics == ()
        follower_fetches(state)  # late, but the records are in the leader's log: committed
        replicated = await fetch(state, 5, [("t", [0])])
        assert replicated.topics[0].partitions[0].committed_offset == 11
    finally:
        await state.group_coordinator.shutdown()
        state.log_manager.shutdown()


async def test_a_commit_whose_leadership_moves_is_not_coordinated_here(
        state: BrokerState) -> None:
    commit = asyncio.create_task(call(state, ApiKey.OFFSET_COMMIT, 8,
                                      **commit_fields(8, ("t", 0, 11))))
    await until(lambda: waiting(state) == 1, "the commit to wait for the ISR")
    record = state.topic_store.get(OFFSETS_TOPIC)
    assert record is not None
    state.replica_manager.make_follower(OFFSETS_TOPIC, 0, record.topic_id, FOLLOWER, 2,
                                        replicas=(1, FOLLOWER), isr=frozenset({1, FOLLOWER}),
                                        partition_epoch=1)
    assert partition_errors(await asyncio.wait_for(commit, 5)) == {
        ("t", 0): ErrorCode.not_coordinator}


async def test_sync_group_answers_the_assignment_once_it_is_replicated(
        state: BrokerState) -> None:
    joined = await join(state, 5, instance="host-1")
    assert joined.error_code == ErrorCode.none
    sync = asyncio.create_task(call(
        state, ApiKey.SYNC_GROUP, 3, group_id="g", generation_id=joined.generation_id,
        member_id=joined.member_id, group_instance_id="host-1",
        assignments=[{"member_id": joined.member_id, "assignment": b"mine"}]))
    await until(lambda: waiting(state) == 1, "the stored assignment to wait for the ISR")
    assert not sync.done()
    follower_fetches(state)
    synced = await asyncio.wait_for(sync, 5)
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")


async def test_delete_groups_answers_once_the_tombstones_are_replicated(
        state: BrokerState) -> None:
    commit = asyncio.create_task(call(state, ApiKey.OFFSET_COMMIT, 8,
                                      **commit_fields(8, ("t", 0, 11))))
    await until(lambda: waiting(state) == 1, "the commit to wait for the ISR")
    follower_fetches(state)
    await asyncio.wait_for(commit, 5)
    delete = asyncio.create_task(call(state, ApiKey.DELETE_GROUPS, 2, groups_names=["g"]))
    await until(lambda: waiting(state) == 1, "the tombstones to wait for the ISR")
    assert not delete.done()
    follower_fetches(state)
    deleted = await asyncio.wait_for(delete, 5)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", ErrorCode.none)]
