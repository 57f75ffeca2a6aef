"""The group coordinator on a real log and a ``ManualClock``: timeouts, static members, KIP-394,
commits during rebalances, replay after a restart, expiry and deletion.

Timers are driven by hand: the clock moves, ``tick()`` expires what is due. Parked requests
(JoinGroup, SyncGroup) are tasks that complete when the coordinator answers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.group.classic_group import OffsetAndMetadata
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.group.member import JoinGroupResult, SyncGroupResult
from strata.broker.group.membership import JoinRequest
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import (
    add_topics,
    consumer_subscription,
    group_broker_state,
    restarted_group_broker_state,
)

T = TypeVar("T")
SESSION_MS = 10_000
REBALANCE_MS = 30_000
DAY_MS = 24 * 60 * 60 * 1000


def join_request(member_id: str = "", *, instance: str | None = None,
                 require_known: bool = False, topics: tuple[str, ...] = ("t",),
                 session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
                 protocols: tuple[str, ...] = ("range",)) -> JoinRequest:
    subscription = consumer_subscription(*topics)
    return JoinRequest(member_id, instance, require_known, "client", "/127.0.0.1", rebalance_ms,
                       session_ms, "consumer", tuple((p, subscription) for p in protocols))


async def settle() -> None:
    """Let tasks whose requests were just answered finish."""
    for _ in range(3):
        await asyncio.sleep(0)


async def started(coro: Awaitable[T]) -> asyncio.Task[T]:
    """Run ``coro`` until it is answered or parked."""
    task: asyncio.Task[T] = asyncio.ensure_future(coro)
    await settle()
    return task


class Cluster:
    """One broker with a started coordinator (no timer task: ``tick`` after moving time)."""

    def __init__(self, tmp_path: Path, **config: str) -> None:
        self.tmp_path = tmp_path
        self.config = config
        self.clock = ManualClock()
        self.state: BrokerState = group_broker_state(tmp_path, self.clock, **config)

    @property
    def coordinator(self) -> GroupCoordinator:
        return self.state.group_coordinator

    async def start(self) -> Cluster:
        await add_topics(self.state, ("t", 2), ("u", 1))
        await self.coordinator.startup(run_timers=False)
        assert await self.coordinator.ensure_offsets_topic() == ErrorCode.none
        return self

    async def restart(self) -> None:
        await self.coordinator.shutdown()
        self.state = restarted_group_broker_state(self.state, self.tmp_path, **self.config)
        await self.coordinator.startup(run_timers=False)
        await self.coordinator.wait_loaded()

    async def advance(self, ms: int) -> None:
        """Move time, expire what is due, let answered requests finish."""
        self.clock.advance(ms)
        self.coordinator.tick()
        await settle()

    def group(self, group_id: str = "g") -> Any:
        return self.coordinator.group(group_id)

    async def join(self, request: JoinRequest, group_id: str = "g"
                   ) -> asyncio.Task[JoinGroupResult]:
        return await started(self.coordinator.join_group(group_id, request))

    async def sync(self, member_id: str, generation: int,
                   assignments: dict[str, bytes] | None = None, instance: str | None = None,
                   group_id: str = "g") -> asyncio.Task[SyncGroupResult]:
        return await started(self.coordinator.sync_group(group_id, generation, member_id,
                                                          instance, assignments or {}))

    async def stable_member(self, instance: str | None = None) -> tuple[str, int]:
        """A member joins and syncs alone; returns (member id, generation)."""
        joined = (await self.join(join_request(instance=instance))).result()
        assert joined.error == ErrorCode.none, joined
        synced = await self.sync(joined.member_id, joined.generation_id,
                                 {joined.member_id: b"all"}, instance)
        assert synced.result().assignment == b"all"
        return joined.member_id, joined.generation_id

    async def stable_pair(self) -> tuple[str, str, int]:
        """Leader m1 and follower m2, Stable."""
        m1, _ = await self.stable_member()
        second = await self.join(join_request())
        assert not second.done()
        first = (await self.join(join_request(m1))).result()
        m2 = second.result().member_id
        assert first.leader_id == m1 and first.generation_id == 2
        follower = await self.sync(m2, 2)
        assert not follower.done()
        await self.sync(m1, 2, {m1: b"one", m2: b"two"})
        assert follower.result().assignment == b"two"
        assert self.group().state is GroupState.STABLE
        return m1, m2, 2

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat("g", member_id, instance, generation)

    def commit(self, member_id: str, generation: int, offset: int = 10, group_id: str = "g",
               partition: tuple[str, int] = ("t", 0)) -> ErrorCode:
        at = self.clock.milliseconds()
        errors = self.coordinator.commit_offsets(
            group_id, member_id, None, generation,
            {partition: OffsetAndMetadata(offset, -1, "m", at)})
        return errors[partition]

    def committed(self, group_id: str = "g", partition: tuple[str, int] = ("t", 0)) -> int | None:
        error, offsets = self.coordinator.fetch_offsets(group_id, [partition])
        assert error == ErrorCode.none
        found = offsets[partition]
        return None if found is None else found.offset


@pytest.fixture
async def cluster(tmp_path: Path) -> Any:
    c = await Cluster(tmp_path).start()
    yield c
    await c.coordinator.shutdown()
    c.state.log_manager.shutdown()


# ------------------------------------------------------------------------------ sessions


async def test_heartbeats_keep_a_member_and_silence_expires_it(cluster: Cluster) -> None:
    member, generation = await cluster.stable_member()
    for _ in range(3):
        await cluster.advance(SESSION_MS - 1)
        assert cluster.heartbeat(member, generation) == ErrorCode.none
    await cluster.advance(SESSION_MS)
    group = cluster.group()
    assert not group.has(member)
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 1
    assert cluster.heartbeat(member, generation) == ErrorCode.unknown_member_id


async def test_a_commit_keeps_a_member_alive(cluster: Cluster) -> None:
    member, generation = await cluster.stable_member()
    await cluster.advance(SESSION_MS - 1)
    assert cluster.commit(member, generation) == ErrorCode.none
    await cluster.advance(SESSION_MS - 1)
    assert cluster.group().has(member)


async def test_session_timeout_bounds(cluster: Cluster) -> None:
    for session in (5999, 1_800_001):
        result = (await cluster.join(join_request(session_ms=session))).result()
        assert result.error == ErrorCode.invalid_session_timeout


async def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(
        cluster: Cluster) -> None:
    m1, m2, _ = await cluster.stable_pair()
    newcomer = await cluster.join(join_request())
    assert cluster.heartbeat(m1, 2) == ErrorCode.rebalance_in_progress
    rejoin = await cluster.join(join_request(m1))
    for _ in range(REBALANCE_MS // 5000 - 1):  # m2 is alive (it heartbeats) but busy
        await cluster.advance(5000)
        assert cluster.heartbeat(m2, 2) == ErrorCode.rebalance_in_progress
    await cluster.advance(4999)
    assert not rejoin.done()
    await cluster.advance(1)
    assert rejoin.result().generation_id == 3 and len(rejoin.result().members) == 2
    assert newcomer.result().error == ErrorCode.none
    assert not cluster.group().has(m2)
    assert cluster.heartbeat(m2, 2) == ErrorCode.unknown_member_id


async def test_pending_sync_members_are_removed_after_the_rebalance_timeout(
        cluster: Cluster) -> None:
    m1, m2, _ = await cluster.stable_pair()
    await cluster.join(join_request(m1))
    rejoin2 = await cluster.join(join_request(m2))
    assert rejoin2.result().generation_id == 3
    await cluster.sync(m1, 3, {m1: b"x", m2: b"y"})  # m2 heartbeats but never syncs
    for _ in range(REBALANCE_MS // 5000 - 1):
        await cluster.advance(5000)
        assert cluster.heartbeat(m1, 3) == cluster.heartbeat(m2, 3) == ErrorCode.none
    await cluster.advance(5000)
    assert cluster.heartbeat(m1, 3) == ErrorCode.rebalance_in_progress
    group = cluster.group()
    assert not group.has(m2) and group.state is GroupState.PREPARING_REBALANCE


async def test_initial_rebalance_delay_waits_for_more_members(tmp_path: Path) -> None:
    cluster = await Cluster(tmp_path, group_initial_rebalance_delay_ms="3000").start()
    first = await cluster.join(join_request())
    await cluster.advance(2000)
    second = await cluster.join(join_request())
    await cluster.advance(1000)  # the first delay is over, but a member arrived: wait once more
    assert not first.done()
    await cluster.advance(3000)
    assert first.result().generation_id == second.result().generation_id == 1
    assert {len(first.result().members), len(second.result().members)} == {0, 2}
    await cluster.coordinator.shutdown()
    cluster.state.log_manager.shutdown()


# --------------------------------------------------------------------- KIP-394 and KIP-345


async def test_member_id_required_then_join_with_it(cluster: Cluster) -> None:
    first = (await cluster.join(join_request(require_known=True))).result()
    assert first.error == ErrorCode.member_id_required and first.member_id.startswith("client-")
    group = cluster.group()
    assert group.is_pending_member(first.member_id) and group.state is GroupState.EMPTY
    joined = (await cluster.join(join_request(first.member_id, require_known=True))).result()
    assert joined.error == ErrorCode.none and joined.member_id == first.member_id
    assert not group.pending_members


async def test_a_pending_member_holds_the_rebalance_until_it_expires(cluster: Cluster) -> None:
    m1, generation = await cluster.stable_member()
    pending = (await cluster.join(join_request(require_known=True))).result()
    assert cluster.group().state is GroupState.STABLE  # a pending member does not rebalance
    rejoin = await cluster.join(join_request(m1, topics=("t", "u")))  # changed metadata
    assert not rejoin.done()  # every member joined, but the pending one has not
    await cluster.advance(SESSION_MS)
    assert rejoin.result().generation_id == generation + 1
    assert not cluster.group().is_pending_member(pending.member_id)
    late = (await cluster.join(join_request(pending.member_id))).result()
    assert late.error == ErrorCode.unknown_member_id


async def test_a_static_member_rejoins_without_a_rebalance(cluster: Cluster) -> None:
    old_id, generation = await cluster.stable_member(instance="host-1")
    restarted = (await cluster.join(join_request(instance="host-1"))).result()
    assert restarted.error == ErrorCode.none and restarted.member_id != old_id
    assert restarted.generation_id == generation
    assert restarted.leader_id == old_id  # the old id: the new one runs no assignment
    group = cluster.group()
    assert group.state is GroupState.STABLE and group.static_member_id("host-1") == \
        restarted.member_id
    synced = (await cluster.sync(restarted.member_id, generation, instance="host-1")).result()
    assert synced.assignment == b"all"
    assert cluster.heartbeat(old_id, generation, "host-1") == ErrorCode.fenced_instance_id
    assert cluster.heartbeat(old_id, generation) == ErrorCode.unknown_member_id


async def test_a_static_member_changing_protocol_rebalances(cluster: Cluster) -> None:
    _old_id, generation = await cluster.stable_member(instance="host-1")
    task = await cluster.join(join_request(instance="host-1", protocols=("roundrobin", "range")))
    assert task.result().generation_id == generation + 1  # alone: the join completes at once
    assert cluster.group().protocol_name == "roundrobin"


async def test_a_static_member_survives_a_rebalance_without_rejoining(cluster: Cluster) -> None:
    static_id, _ = await cluster.stable_member(instance="host-1")
    newcomer = await cluster.join(join_request())
    for _ in range(REBALANCE_MS // 5000):  # alive (it heartbeats), but it does not rejoin
        assert cluster.heartbeat(static_id, 1, "host-1") == ErrorCode.rebalance_in_progress
        await cluster.advance(5000)
    assert newcomer.result().generation_id == 2
    assert cluster.group().has(static_id)


# -------------------------------------------------------------------------- commits


async def test_commits_during_preparing_rebalance_are_accepted(cluster: Cluster) -> None:
    _m1, m2, generation = await cluster.stable_pair()
    await cluster.join(join_request())  # a newcomer: PreparingRebalance
    assert cluster.group().state is GroupState.PREPARING_REBALANCE
    assert cluster.commit(m2, generation, offset=17) == ErrorCode.none
    assert cluster.committed() == 17
    assert cluster.commit(m2, generation - 1) == ErrorCode.illegal_generation
    assert cluster.commit("", -1) == ErrorCode.unknown_member_id  # members exist


async def test_commits_while_completing_rebalance_are_refused(cluster: Cluster) -> None:
    m1, m2, _ = await cluster.stable_pair()
    await cluster.join(join_request(m1))
    result = (await cluster.join(join_request(m2))).result()
    assert cluster.group().state is GroupState.COMPLETING_REBALANCE
    assert cluster.commit(m2, result.generation_id) == ErrorCode.rebalance_in_progress


async def test_simple_commits_without_a_group(cluster: Cluster) -> None:
    assert cluster.commit("", -1, offset=5, group_id="simple") == ErrorCode.none
    assert cluster.committed("simple") == 5
    group = cluster.group("simple")
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    assert cluster.commit("m", 3, group_id="other") == ErrorCode.illegal_generation
    assert cluster.committed("nobody") is None


async def test_metadata_too_large(cluster: Cluster) -> None:
    errors = cluster.coordinator.commit_offsets("g", "", None, -1, {
        ("t", 0): OffsetAndMetadata(1, -1, "x" * 4097, 0),
        ("t", 1): OffsetAndMetadata(2, -1, "ok", 0)})
    assert errors == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none}


async def test_fetch_all_offsets(cluster: Cluster) -> None:
    cluster.commit("", -1, offset=1, partition=("t", 0))
    cluster.commit("", -1, offset=2, partition=("u", 0))
    error, offsets = cluster.coordinator.fetch_offsets("g", None)
    assert error == ErrorCode.none
    assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 1, ("u", 0): 2}


# ------------------------------------------------------------------ status and loading


async def test_group_status_checks(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    coordinator = cluster.coordinator
    assert coordinator.heartbeat("g", "m", None, 1) == ErrorCode.coordinator_not_available
    await coordinator.startup(run_timers=False)
    assert coordinator.heartbeat("g", "m", None, 1) == ErrorCode.not_coordinator  # no topic
    assert await coordinator.ensure_offsets_topic() == ErrorCode.none
    assert cluster.state.topic_store.get(OFFSETS_TOPIC) is not None
    assert coordinator.heartbeat("", "m", None, 1) == ErrorCode.invalid_group_id
    assert coordinator.heartbeat("g", "m", None, 1) == ErrorCode.unknown_member_id
    assert coordinator.fetch_offsets("", None) == (ErrorCode.none, {})  # "" is valid here
    await coordinator.shutdown()
    cluster.state.log_manager.shutdown()


async def test_replay_after_a_restart(cluster: Cluster) -> None:
    m1, m2, generation = await cluster.stable_pair()
    assert cluster.commit(m1, generation, offset=42) == ErrorCode.none
    assert cluster.commit("", -1, offset=7, group_id="simple") == ErrorCode.none
    assert cluster.commit("", -1, offset=8, group_id="gone") == ErrorCode.none
    assert cluster.coordinator.delete_groups(["gone"]) == {"gone": ErrorCode.none}
    await cluster.restart()
    group = cluster.group()
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert group.leader_id == m1 and list(group.members) == [m1, m2]
    assert group.get(m2).assignment == b"two" and group.protocol_name == "range"
    assert cluster.committed() == 42 and cluster.committed("simple") == 7
    assert cluster.group("gone") is None and cluster.committed("gone") is None
    # The members carry on with their generation; one that went away expires.
    await cluster.advance(SESSION_MS - 1)
    assert cluster.heartbeat(m1, generation) == ErrorCode.none
    await cluster.advance(2)
    assert not cluster.group().has(m2) and cluster.group().state is \
        GroupState.PREPARING_REBALANCE


async def test_groups_answer_load_in_progress_while_their_partition_loads(
        cluster: Cluster) -> None:
    member, generation = await cluster.stable_member()
    await cluster.coordinator.shutdown()
    cluster.state = restarted_group_broker_state(cluster.state, cluster.tmp_path)
    coordinator = cluster.coordinator
    await coordinator.startup(run_timers=False)  # the load runs in a task
    assert coordinator.is_loading()
    assert coordinator.heartbeat("g", member, None, generation) == ErrorCode.none  # blindly
    result = await coordinator.sync_group("g", generation, member, None, {})
    assert result.error == ErrorCode.rebalance_in_progress
    joined = await coordinator.join_group("g", join_request(member))
    assert joined.error == ErrorCode.coordinator_load_in_progress
    assert coordinator.list_groups()[0] == ErrorCode.coordinator_load_in_progress
    await coordinator.wait_loaded()
    assert coordinator.heartbeat("g", member, None, generation) == ErrorCode.none
    assert coordinator.list_groups() == (ErrorCode.none, [("g", "consumer", "Stable")])


async def test_resignation_answers_parked_requests_not_coordinator(cluster: Cluster) -> None:
    m1, _ = await cluster.stable_member()
    newcomer = await cluster.join(join_request())
    index = cluster.coordinator.partition_for("g")
    cluster.coordinator.on_resignation(index)
    await settle()
    assert newcomer.result().error == ErrorCode.not_coordinator
    assert cluster.heartbeat(m1, 1) == ErrorCode.not_coordinator
    assert cluster.group() is None


# ---------------------------------------------------------- expiry, deletion, describe


async def test_offsets_of_an_empty_group_expire_and_the_group_dies(cluster: Cluster) -> None:
    member, generation = await cluster.stable_member()
    assert cluster.commit(member, generation, offset=3) == ErrorCode.none
    assert cluster.coordinator.leave_group("g", [(member, None)]) == (
        ErrorCode.none, [ErrorCode.none])
    assert cluster.group().state is GroupState.EMPTY
    await cluster.advance(7 * DAY_MS - 1)
    assert cluster.coordinator.cleanup_group_metadata() == 0
    await cluster.advance(1)
    assert cluster.coordinator.cleanup_group_metadata() == 1
    assert cluster.group() is None and cluster.committed() is None
    await cluster.restart()  # the tombstones replay too
    assert cluster.group() is None and cluster.committed() is None


async def test_delete_groups(cluster: Cluster) -> None:
    await cluster.stable_member()
    cluster.commit("", -1, group_id="idle")
    assert cluster.coordinator.delete_groups(["g", "idle", "nope", "idle", ""]) == {
        "g": ErrorCode.non_empty_group, "idle": ErrorCode.none,
        "nope": ErrorCode.group_id_not_found, "": ErrorCode.group_id_not_found}
    assert cluster.committed("idle") is None


async def test_offset_delete(cluster: Cluster) -> None:
    member, generation = await cluster.stable_member()  # subscribed to t
    cluster.commit(member, generation, partition=("t", 0))
    cluster.commit(member, generation, partition=("u", 0))
    error, errors = cluster.coordinator.delete_offsets("g", [("t", 0), ("u", 0)])
    assert error == ErrorCode.none
    assert errors == {("t", 0): ErrorCode.group_subscribed_to_topic, ("u", 0): ErrorCode.none}
    assert cluster.committed(partition=("u", 0)) is None
    assert cluster.committed(partition=("t", 0)) == 10
    assert cluster.coordinator.delete_offsets("nope", [("t", 0)]) == (
        ErrorCode.group_id_not_found, {})
    cluster.commit("", -1, group_id="simple")
    assert cluster.coordinator.delete_offsets("simple", [("t", 0)]) == (
        ErrorCode.none, {("t", 0): ErrorCode.none})
    assert cluster.group("simple") is None  # Empty without offsets: dead


async def test_describe_and_list(cluster: Cluster) -> None:
    _member, _ = await cluster.stable_member()
    error, summary = cluster.coordinator.describe_group("g")
    assert error == ErrorCode.none and summary.state == "Stable"
    assert summary.protocol_name == "range" and summary.members[0].assignment == b"all"
    assert cluster.coordinator.describe_group("nope")[1].state == "Dead"
    assert cluster.coordinator.list_groups() == (ErrorCode.none, [("g", "consumer", "Stable")])
