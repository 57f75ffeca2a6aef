"""Online migration (KIP-848): a classic group with members upgraded to a consumer group when
a member joins with ConsumerGroupHeartbeat, its classic members served through JoinGroup /
SyncGroup / Heartbeat / LeaveGroup, and downgraded when the last consumer-protocol member
leaves; offsets kept, conversions replayed after a restart. Every request through the codec
(``group_wire.round_trip``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_coordinator import consumer_group_config
from strata.broker.group.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    pairs_of,
)
from strata.broker.group.consumer_group_migration import MigrationPolicy
from strata.broker.group.consumer_group_records import records_of, replay
from strata.broker.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from strata.broker.group.state import GroupState
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock
from tests.unit.broker.group_wire import round_trip
from tests.unit.broker.helpers import add_topics, group_broker_state, restarted_group_broker_state

TOPIC = "u"
PARTITIONS = 6


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    started = await _started(group_broker_state(tmp_path, ManualClock(),
                                                offsets_topic_num_partitions="5"))
    try:
        yield started
    finally:
        await _stop(started)


async def _started(state: BrokerState, *, topics: bool = True) -> BrokerState:
    if topics:
        await add_topics(state, (TOPIC, PARTITIONS))
    await state.group_coordinator.startup(run_timers=False)
    await state.group_coordinator.wait_loaded()
    found = await round_trip(state, ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
    assert found.error_code == 0
    return state


async def _stop(state: BrokerState) -> None:
    await state.group_coordinator.shutdown()
    state.log_manager.shutdown()


def _join_fields(member_id: str, owned: list[int] | None = None,
                 instance: str | None = None) -> dict[str, Any]:
    metadata = encode_subscription([TOPIC], owned=[(TOPIC, p) for p in owned or []])
    return {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}], "reason": None}


async def classic_join(state: BrokerState, member_id: str = "",
                       owned: list[int] | None = None, instance: str | None = None) -> Any:
    """JoinGroup v5 (twice for a new member: MEMBER_ID_REQUIRED first)."""
    answer = await round_trip(state, ApiKey.JOIN_GROUP, 5,
                              _join_fields(member_id, owned, instance))
    if answer.error_code == ErrorCode.member_id_required:
        answer = await round_trip(state, ApiKey.JOIN_GROUP, 5,
                                  _join_fields(answer.member_id, owned, instance))
    return answer


async def classic_sync(state: BrokerState, member_id: str, generation: int,
                       assignments: dict[str, bytes] | None = None,
                       instance: str | None = None) -> Any:
    return await round_trip(state, ApiKey.SYNC_GROUP, 3, {
        "group_id": "g", "generation_id": generation, "member_id": member_id,
        "group_instance_id": instance, "assignments": [
            {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})


async def classic_heartbeat(state: BrokerState, member_id: str, generation: int,
                            instance: str | None = None) -> int:
    answer = await round_trip(state, ApiKey.HEARTBEAT, 3, {
        "group_id": "g", "generation_id": generation, "member_id": member_id,
        "group_instance_id": instance})
    return int(answer.error_code)


def partitions_of(sync_answer: Any) -> list[int]:
    return sorted(p for t, p in decode_assignment(sync_answer.assignment).partitions)


async def consumer_beat(state: BrokerState, member_id: str, epoch: int,
                        owned: list[int] | None = None, instance: str | None = None) -> Any:
    tid = topic_id(state)
    fields: dict[str, Any] = {"group_id": "g", "member_id": member_id, "member_epoch": epoch,
                              "instance_id": instance,
                              "topic_partitions": None if owned is None else
                              [{"topic_id": tid, "partitions": owned}]}
    if epoch == 0:
        fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC],
                      topic_partitions=[])
    return await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, fields)


def topic_id(state: BrokerState) -> uuid.UUID:
    record = state.topic_store.get(TOPIC)
    assert record is not None
    return record.topic_id


def consumer_partitions(answer: Any) -> list[int]:
    assert answer.assignment is not None
    return sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)


async def commit(state: BrokerState, member_id: str, generation: int, offset: int) -> int:
    answer = await round_trip(state, ApiKey.OFFSET_COMMIT, 8, {
        "group_id": "g", "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})
    return int(answer.topics[0].partitions[0].error_code)


def committed(state: BrokerState) -> int | None:
    offset = state.group_coordinator.fetch_offsets("g", [(TOPIC, 0)])[1][(TOPIC, 0)]
    return None if offset is None else offset.offset


def assert_disjoint(group: ConsumerGroup) -> None:
    held: set[tuple[uuid.UUID, int]] = set()
    for member in group.members.values():
        owned = set(member.owned())
        assert not owned & held, f"{member.member_id} holds a partition another member holds"
        held |= owned


async def classic_group_of_one(state: BrokerState, instance: str | None = None) -> str:
    """A classic group: member A, generation 1, every partition, an offset committed."""
    joined = await classic_join(state, instance=instance)
    assert joined.error_code == 0 and joined.generation_id == 1, joined
    a = joined.member_id
    synced = await classic_sync(state, a, 1, {a: encode_assignment({TOPIC: range(PARTITIONS)})},
                                instance)
    assert synced.error_code == 0
    assert await commit(state, a, 1, 7) == ErrorCode.none
    return str(a)


# ------------------------------------------------------------------------------- pure parts
def test_migration_policy_is_kafkas() -> None:
    assert consumer_group_config(BrokerConfig({})).migration_policy \
        is MigrationPolicy.BIDIRECTIONAL
    for value, upgrade, downgrade in (("UPGRADE", True, False), ("downgrade", False, True),
                                      ("Disabled", False, False), ("bidirectional", True, True)):
        policy = consumer_group_config(BrokerConfig(
            {"group.consumer.migration.policy": value})).migration_policy
        assert (policy.upgrade_enabled, policy.downgrade_enabled) == (upgrade, downgrade)
    with pytest.raises(ConfigError, match="sideways"):
        consumer_group_config(BrokerConfig({"group.consumer.migration.policy": "sideways"}))


def test_consumer_protocol_round_trips() -> None:
    data = encode_subscription(["a", "b"], owned=[("a", 1), ("a", 0)], generation_id=4,
                               rack_id="r1")
    decoded = decode_subscription(data)
    assert (decoded.topics, decoded.owned_partitions, decoded.generation_id, decoded.rack_id,
            decoded.version) == (("a", "b"), (("a", 0), ("a", 1)), 4, "r1", 3)
    v0 = decode_subscription(encode_subscription(["a"], version=0))
    assert (v0.topics, v0.owned_partitions, v0.rack_id) == (("a",), (), None)
    assignment = decode_assignment(encode_assignment({"b": [2], "a": [1, 0]}, version=1))
    assert (assignment.partitions, assignment.version) == ((("a", 0), ("a", 1), ("b", 2)), 1)


def test_classic_member_metadata_is_recorded_and_replayed() -> None:
    group = ConsumerGroup("g")
    group.group_epoch = 3
    classic = ClassicMemberMetadata(10_000, (("range", b"\x00\x01xy"), ("cooperative", b"")))
    group.update_member(ConsumerGroupMember("a", subscribed_topic_names=("t",), member_epoch=3,
                                            classic=classic))
    group.update_member(ConsumerGroupMember("b", subscribed_topic_names=("t",), member_epoch=3))
    replayed = replay(list(records_of(group).items()))["g"]
    assert replayed.members["a"].classic == classic
    assert replayed.members["b"].classic is None


# ------------------------------------------------------------------------------- upgrade
async def test_upgrade_keeps_members_and_offsets(state: BrokerState) -> None:
    a = await classic_group_of_one(state)
    joined = await consumer_beat(state, "b", 0)
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 2), joined
    assert consumer_partitions(joined) == []  # its partitions are A's until A revokes them
    group = state.group_coordinator.consumer_groups.group("g")
    assert group is not None and group.members[a].uses_classic_protocol
    assert committed(state) == 7
    holder = state.group_coordinator.group("g")
    assert holder is not None and not holder.members

    # A (classic, cooperative: keeps what it owns) learns it must rejoin.
    assert await classic_heartbeat(state, a, 1) == ErrorCode.rebalance_in_progress
    rejoined = await classic_join(state, a, owned=list(range(PARTITIONS)))
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (0, 1, "")
    synced = await classic_sync(state, a, 1)
    kept = partitions_of(synced)
    assert len(kept) == 3  # the three others are pending revocation
    assert await classic_heartbeat(state, a, 1) == ErrorCode.rebalance_in_progress
    rejoined = await classic_join(state, a, owned=kept)
    assert rejoined.generation_id == 2
    assert partitions_of(await classic_sync(state, a, 2)) == kept
    assert await classic_heartbeat(state, a, 2) == ErrorCode.none
    assert await commit(state, a, 1, 8) == ErrorCode.illegal_generation
    assert await commit(state, a, 2, 9) == ErrorCode.none and committed(state) == 9

    b_answer = await consumer_beat(state, "b", 2, owned=[])
    b_parts = consumer_partitions(b_answer)
    assert sorted(b_parts + kept) == list(range(PARTITIONS))
    assert_disjoint(group)


async def test_mixed_group_reconciles_without_double_ownership(state: BrokerState) -> None:
    """An eager classic member (owns nothing when it rejoins), a consumer member, and a
    classic member joining the mixed group: every step keeps partitions disjoint."""
    a = await classic_group_of_one(state)
    await consumer_beat(state, "b", 0)
    group = state.group_coordinator.consumer_groups.group("g")
    assert group is not None
    rejoined = await classic_join(state, a, owned=[])
    assert rejoined.generation_id == 2
    a_parts = partitions_of(await classic_sync(state, a, 2))
    assert len(a_parts) == 3
    assert_disjoint(group)
    joined = await classic_join(state)  # C: a new classic member of the mixed group
    assert joined.error_code == 0, joined
    c = joined.member_id
    c_parts = partitions_of(await classic_sync(state, c, joined.generation_id))
    assert not set(c_parts) & set(a_parts)  # only what nobody holds
    assert_disjoint(group)
    epochs = {"b": 2}
    owned: dict[str, list[int]] = {"b": [], a: a_parts, c: c_parts}
    for _ in range(4):  # everyone converges
        answer = await consumer_beat(state, "b", epochs["b"], owned=owned["b"])
        epochs["b"] = answer.member_epoch
        if answer.assignment is not None:
            owned["b"] = consumer_partitions(answer)
        for member in (a, c):
            generation = group.members[member].member_epoch
            if await classic_heartbeat(state, member, generation) \
                    == ErrorCode.rebalance_in_progress:
                again = await classic_join(state, member, owned=[])
                owned[member] = partitions_of(
                    await classic_sync(state, member, again.generation_id))
            assert_disjoint(group)
    assert sorted(len(p) for p in owned.values()) == [2, 2, 2]
    assert sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))
    left = await round_trip(state, ApiKey.LEAVE_GROUP, 3, {
        "group_id": "g", "members": [{"member_id": c, "group_instance_id": None}]})
    assert left.error_code == 0 and left.members[0].error_code == 0
    assert c not in group.members


async def test_upgrade_refused_by_policy(tmp_path: Path) -> None:
    state = await _started(group_broker_state(
        tmp_path, ManualClock(), offsets_topic_num_partitions="5",
        group_consumer_migration_policy="downgrade"))
    try:
        await classic_group_of_one(state)
        answer = await consumer_beat(state, "b", 0)
        assert answer.error_code == ErrorCode.group_id_not_found
        assert answer.error_message == "Group g is not a consumer group"
        classic = state.group_coordinator.group("g")
        assert classic is not None and classic.state is GroupState.STABLE
    finally:
        await _stop(state)


# ----------------------------------------------------------------------------- downgrade
async def test_downgrade_when_the_last_consumer_member_leaves(tmp_path: Path) -> None:
    state = await _started(group_broker_state(tmp_path, ManualClock(),
                                              offsets_topic_num_partitions="5"))
    try:
        a = await classic_group_of_one(state)
        await consumer_beat(state, "b", 0)
        await classic_join(state, a, owned=[])
        await classic_sync(state, a, 2)
        group = state.group_coordinator.consumer_groups.group("g")
        assert group is not None
        a_pairs = pairs_of(group.members[a].assigned_partitions)
        await state.group_coordinator.shutdown()
        state = await _started(restarted_group_broker_state(
            state, tmp_path, offsets_topic_num_partitions="5"), topics=False)
        # The restarted coordinator resumes the consumer group, A still a classic member.
        group = state.group_coordinator.consumer_groups.group("g")
        assert group is not None and group.members[a].uses_classic_protocol
        assert pairs_of(group.members[a].assigned_partitions) == a_pairs
        assert await classic_heartbeat(state, a, 2) == ErrorCode.none
        left = await consumer_beat(state, "b", -1)
        assert left.error_code == ErrorCode.none
        assert state.group_coordinator.consumer_groups.group("g") is None
        classic = state.group_coordinator.group("g")
        assert classic is not None
        assert (classic.state, classic.generation_id) == (GroupState.PREPARING_REBALANCE, 2)
        assert committed(state) == 7
        assert await classic_heartbeat(state, a, 2) == ErrorCode.rebalance_in_progress
        rejoined = await classic_join(state, a)
        assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (0, 3, a)
        await state.group_coordinator.shutdown()
        state = await _started(restarted_group_broker_state(
            state, tmp_path, offsets_topic_num_partitions="5"), topics=False)
        assert state.group_coordinator.consumer_groups.group("g") is None
        reloaded = state.group_coordinator.group("g")
        assert reloaded is not None and list(reloaded.members) == [a]
        assert committed(state) == 7
    finally:
        await _stop(state)


async def test_static_classic_member_replacing_the_last_consumer_member_downgrades(
        state: BrokerState) -> None:
    """Kafka's downgrade by static replacement: the consumer member with instance ib leaves
    for now (epoch -2) and ib comes back on the classic protocol; the group is classic at once,
    without a rebalance, every static member keeping its instance id and its partitions."""
    a = await classic_group_of_one(state, instance="ia")
    await consumer_beat(state, "b", 0, instance="ib")
    rejoined = await classic_join(state, a, owned=[], instance="ia")
    a_parts = partitions_of(await classic_sync(state, a, rejoined.generation_id,
                                               instance="ia"))
    b_parts = consumer_partitions(await consumer_beat(state, "b", 2, owned=[], instance="ib"))
    assert sorted(a_parts + b_parts) == list(range(PARTITIONS)) and len(a_parts) == 3
    assert (await consumer_beat(state, "b", -2, instance="ib")).error_code == 0
    assert state.group_coordinator.consumer_groups.group("g") is not None  # b keeps its place

    joined = await classic_join(state, instance="ib")  # ib restarted with group.protocol=classic
    assert joined.error_code == 0, joined
    new_b = joined.member_id
    assert state.group_coordinator.consumer_groups.group("g") is None
    classic = state.group_coordinator.group("g")
    assert classic is not None and classic.state is GroupState.STABLE
    assert classic.static_members == {"ia": a, "ib": new_b}
    assert joined.generation_id == classic.generation_id == 2
    assert partitions_of(await classic_sync(state, new_b, 2, instance="ib")) == b_parts
    assert await classic_heartbeat(state, a, 2, "ia") == ErrorCode.none
    assert committed(state) == 7

    # A restarts (a new member id, the same instance id): it takes over its place and
    # keeps its partitions, with no rebalance (KIP-345).
    restarted = await classic_join(state, instance="ia")
    assert restarted.error_code == 0 and restarted.generation_id == 2, restarted
    assert classic.static_members["ia"] == restarted.member_id != a
    assert partitions_of(await classic_sync(state, restarted.member_id, 2,
                                            instance="ia")) == a_parts
    assert classic.state is GroupState.STABLE


async def test_describe_tells_classic_members_apart(state: BrokerState) -> None:
    a = await classic_group_of_one(state)
    await consumer_beat(state, "b", 0)
    described = await round_trip(state, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": ["g"], "include_authorized_operations": False})
    types = {m.member_id: m.member_type for m in described.groups[0].members}
    assert types == {a: 0, "b": 1}
