"""ConsumerGroupHeartbeat / ConsumerGroupDescribe on a socket-less broker, and what the
classic group APIs answer about a consumer group: every request and answer through the codec
at its version (``group_wire.round_trip``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.group.classic_group import OffsetAndMetadata
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock
from tests.unit.broker.group_wire import fresh_state, join_fields, joined_member, round_trip, served
from tests.unit.broker.helpers import add_topics, restarted_group_broker_state


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    async with fresh_state(tmp_path) as started:
        yield started


def join(member_id: str = "m1", group_id: str = "g", **fields: Any) -> dict[str, Any]:
    return {"group_id": group_id, "member_id": member_id, "member_epoch": 0,
            "rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t"],
            "topic_partitions": [], **fields}


def beat(member_id: str, epoch: int, owned: Any = None, group_id: str = "g") -> dict[str, Any]:
    return {"group_id": group_id, "member_id": member_id, "member_epoch": epoch,
            "topic_partitions": owned}


def topic_id(state: BrokerState, name: str = "t") -> Any:
    record = state.topic_store.get(name)
    assert record is not None
    return record.topic_id


def test_served_versions() -> None:
    assert served(ApiKey.CONSUMER_GROUP_HEARTBEAT) == range(0, 2)
    assert served(ApiKey.CONSUMER_GROUP_DESCRIBE) == range(0, 2)


@pytest.mark.parametrize("version", served(ApiKey.CONSUMER_GROUP_HEARTBEAT))
async def test_join_gets_every_partition(state: BrokerState, version: int) -> None:
    answer = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, version, join())
    assert answer.error_code == ErrorCode.none, answer
    assert (answer.member_id, answer.member_epoch) == ("m1", 1)
    assert answer.heartbeat_interval.total_seconds() == 5
    assert answer.assignment is not None
    assert [(t.topic_id, list(t.partitions)) for t in answer.assignment.topic_partitions] \
        == [(topic_id(state), [0, 1])]
    again = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, version,
                             beat("m1", 1))
    assert again.member_epoch == 1 and again.assignment is None


async def test_member_id_rules(state: BrokerState) -> None:
    v0 = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join(member_id=""))
    assert v0.error_code == ErrorCode.none and v0.member_id  # the coordinator made one
    v1 = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join(member_id=""))
    assert v1.error_code == ErrorCode.invalid_request
    assert v1.error_message == "MemberId can't be empty."


async def test_errors_are_kafkas(state: BrokerState) -> None:
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join())
    cases = [
        (beat("m1", 7), ErrorCode.fenced_member_epoch),
        (beat("nobody", 1), ErrorCode.unknown_member_id),
        (beat("m1", 1, group_id="other"), ErrorCode.group_id_not_found),
        (join("m2", server_assignor="sticky"), ErrorCode.unsupported_assignor),
        (join("m2", subscribed_topic_regex="(x"), ErrorCode.invalid_regular_expression),
        (join("m2", rebalance_timeout_ms=-1), ErrorCode.invalid_request),
    ]
    for fields, error in cases:
        answer = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, fields)
        assert answer.error_code == error, (fields, answer)
        assert answer.error_message


async def test_a_second_member_gets_partitions_after_revocation(state: BrokerState) -> None:
    tid = topic_id(state)
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    second = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m2"))
    assert second.member_epoch == 2 and second.assignment.topic_partitions == ()
    revoke = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                              beat("m1", 1, [{"topic_id": tid, "partitions": [0, 1]}]))
    assert revoke.member_epoch == 1
    kept = list(revoke.assignment.topic_partitions[0].partitions)
    assert len(kept) == 1
    done = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                            beat("m1", 1, [{"topic_id": tid, "partitions": kept}]))
    assert done.member_epoch == 2
    given = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                             beat("m2", 2, []))
    assert [list(t.partitions) for t in given.assignment.topic_partitions] \
        == [[1 - kept[0]]]


@pytest.mark.parametrize("version", served(ApiKey.CONSUMER_GROUP_DESCRIBE))
async def test_describe(state: BrokerState, version: int) -> None:
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    await joined_member(state, 5, group_id="classic")
    answer = await round_trip(state, ApiKey.CONSUMER_GROUP_DESCRIBE, version, {
        "group_ids": ["g", "nope", "classic"], "include_authorized_operations": False})
    g, nope, classic = answer.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
            g.assignor_name) == (ErrorCode.none, "Stable", 1, 1, "uniform")
    (member,) = g.members
    assert (member.member_id, member.member_epoch, member.client_id) == ("m1", 1, "golden")
    assert member.subscribed_topic_names == ("t",)
    for assignment in (member.assignment, member.target_assignment):
        assert [(t.topic_name, list(t.partitions)) for t in assignment.topic_partitions] \
            == [("t", [0, 1])]
    if version >= 1:
        assert member.member_type == 1
    assert (nope.error_code, nope.error_message) == (ErrorCode.group_id_not_found,
                                                     "Group nope not found.")
    assert classic.error_code == ErrorCode.group_id_not_found
    assert classic.error_message == "Group classic is not a consumer group."


async def test_offsets_are_checked_against_member_epochs(state: BrokerState) -> None:
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))

    async def commit(member_id: str, epoch: int) -> int:
        answer = await round_trip(state, ApiKey.OFFSET_COMMIT, 9, {
            "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member_id,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        return int(answer.topics[0].partitions[0].error_code)

    assert await commit("m1", 0) == ErrorCode.stale_member_epoch
    assert await commit("zz", 1) == ErrorCode.unknown_member_id
    assert await commit("", -1) == ErrorCode.unknown_member_id  # the group has members
    assert await commit("m1", 1) == ErrorCode.none

    async def fetch(member_id: str | None, epoch: int) -> Any:
        answer = await round_trip(state, ApiKey.OFFSET_FETCH, 9, {
            "groups": [{"group_id": "g", "member_id": member_id, "member_epoch": epoch,
                        "topics": [{"name": "t", "partition_indexes": [0]}]}],
            "require_stable": False})
        return answer.groups[0]

    assert (await fetch("m1", 1)).topics[0].partitions[0].committed_offset == 42
    assert (await fetch(None, -1)).topics[0].partitions[0].committed_offset == 42
    assert (await fetch("m1", 3)).error_code == ErrorCode.stale_member_epoch
    assert (await fetch("zz", 1)).error_code == ErrorCode.unknown_member_id


async def test_classic_apis_see_a_consumer_group(state: BrokerState) -> None:
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    await round_trip(state, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m1",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                  "committed_leader_epoch": -1,
                                                  "committed_metadata": ""}]}]})
    listed = await round_trip(state, ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                              "types_filter": []})
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
            for g in listed.groups] == [("g", "consumer", "Stable", "consumer")]
    only_classic = await round_trip(state, ApiKey.LIST_GROUPS, 5, {
        "states_filter": [], "types_filter": ["classic"]})
    assert only_classic.groups == ()
    described = await round_trip(state, ApiKey.DESCRIBE_GROUPS, 6, {
        "groups": ["g"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.group_id_not_found
    joined = await round_trip(state, ApiKey.JOIN_GROUP, 5, join_fields(5, group_id="g"))
    assert joined.error_code == ErrorCode.member_id_required  # a classic member may join
    other = await round_trip(state, ApiKey.JOIN_GROUP, 5,
                             {**join_fields(5, group_id="g"), "protocol_type": "connect"})
    assert other.error_code == ErrorCode.inconsistent_group_protocol
    deleted = await round_trip(state, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == ErrorCode.non_empty_group
    left = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m1", -1))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    deleted = await round_trip(state, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == ErrorCode.none
    assert state.group_coordinator.fetch_offsets("g", [("t", 0)])[1] == {("t", 0): None}


async def test_a_classic_group_with_members_is_not_a_consumer_group(
        state: BrokerState) -> None:
    await joined_member(state, 5, group_id="classic")
    answer = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                              join("m1", group_id="classic"))
    assert answer.error_code == ErrorCode.group_id_not_found
    assert answer.error_message == "Group classic is not a consumer group"


async def test_session_timeout_removes_the_member(state: BrokerState) -> None:
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m2"))
    clock = state.clock
    assert isinstance(clock, ManualClock)
    clock.advance(44_000)
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m1", 1))
    clock.advance(2_000)
    state.group_coordinator.tick()
    group = state.group_coordinator.consumer_groups.group("g")
    assert group is not None and list(group.members) == ["m1"]
    gone = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m2", 2))
    assert gone.error_code == ErrorCode.unknown_member_id


async def test_a_restarted_coordinator_resumes_the_group(tmp_path: Path) -> None:
    """The group's records are replayed: members go on at their epochs, nothing moves."""
    async with fresh_state(tmp_path) as state:
        tid = topic_id(state)
        await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
        await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m2"))
        owned: dict[str, list[int]] = {}
        epochs: dict[str, int] = {}
        for _ in range(3):
            for member, epoch in (("m1", 1), ("m2", 2)):
                answer = await round_trip(
                    state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                    beat(member, epochs.get(member, epoch),
                         [{"topic_id": tid, "partitions": owned.get(member, [])}]))
                assert answer.error_code == ErrorCode.none, answer
                epochs[member] = answer.member_epoch
                if answer.assignment is not None:
                    owned[member] = [p for t in answer.assignment.topic_partitions
                                     for p in t.partitions]
        assert epochs == {"m1": 2, "m2": 2} and sorted(owned["m1"] + owned["m2"]) == [0, 1]
        await state.group_coordinator.shutdown()
        again = restarted_group_broker_state(state, tmp_path,
                                             offsets_topic_num_partitions="5")
    await again.group_coordinator.startup(run_timers=False)
    await again.group_coordinator.wait_loaded()
    try:
        for member in ("m1", "m2"):
            answer = await round_trip(again, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat(
                member, epochs[member], [{"topic_id": tid, "partitions": owned[member]}]))
            assert (answer.error_code, answer.member_epoch) == (ErrorCode.none, 2), answer
            assert answer.assignment is None  # unchanged: nothing revoked, nothing new
        group_state = again.group_coordinator.consumer_groups.group("g")
        assert group_state is not None
        assert {m: sorted(p for ps in member.assigned_partitions.values() for p in ps)
                for m, member in group_state.members.items()} == owned
        described = await round_trip(again, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["g"], "include_authorized_operations": False})
        group = described.groups[0]
        assert (group.group_state, group.group_epoch, group.assignment_epoch) \
            == ("Stable", 2, 2)
    finally:
        await again.group_coordinator.shutdown()
        again.log_manager.shutdown()


async def test_offset_delete_and_expiry_spare_subscribed_topics(state: BrokerState) -> None:
    await add_topics(state, ("old", 1))
    coordinator = state.group_coordinator
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    committed = {("t", 0): OffsetAndMetadata(5, commit_timestamp=0),
                 ("old", 0): OffsetAndMetadata(7, commit_timestamp=0)}
    assert set(coordinator.commit_offsets("g", "m1", None, 1, committed).values()) \
        == {ErrorCode.none}
    error, errors = coordinator.delete_offsets("g", [("t", 0)])
    assert (error, errors) == (ErrorCode.none, {("t", 0): ErrorCode.group_subscribed_to_topic})
    clock = state.clock
    assert isinstance(clock, ManualClock)
    clock.advance(8 * 24 * 3600 * 1000)  # past offsets.retention.minutes (7 days)
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m1", 1))
    assert coordinator.cleanup_group_metadata() == 1  # "old" only: "t" is subscribed
    assert coordinator.fetch_offsets("g", None)[1] == {("t", 0): committed[("t", 0)]}


async def test_transactional_commits_are_checked_against_member_epochs(
        state: BrokerState) -> None:
    coordinator = state.group_coordinator
    await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    offsets = {("t", 0): OffsetAndMetadata(3)}
    assert coordinator.commit_transactional_offsets("g", 1, 0, "m1", None, 0, offsets) \
        == {("t", 0): ErrorCode.stale_member_epoch}
    assert coordinator.commit_transactional_offsets("g", 1, 0, "m1", None, 1, offsets) \
        == {("t", 0): ErrorCode.none}


async def test_racks_reach_the_assignor_once_a_member_has_one(state: BrokerState) -> None:
    """A member with ``rack_id``: the group's topics carry their partitions' replica racks
    (the cluster's image; here a stand-in), the assignor puts each partition on its member's
    rack, and the records keep them."""
    consumer_groups = state.group_coordinator.consumer_groups
    consumer_groups.partition_racks = lambda _t, i: frozenset({f"r{i}"})
    first = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    assert first.error_code == ErrorCode.none
    group = consumer_groups.group("g")
    assert group is not None and group.subscription_metadata["t"].partition_racks == ()
    left = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m1", -1))
    assert left.error_code == ErrorCode.none
    for member, rack in (("a", "r1"), ("b", "r0")):
        answer = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                                  join(member, rack_id=rack))
        assert answer.error_code == ErrorCode.none, answer
    assert group.subscription_metadata["t"].partition_racks \
        == (frozenset({"r0"}), frozenset({"r1"}))
    assert {m: sorted(p for ps in a.values() for p in ps)
            for m, a in group.target_assignment.items()} == {"a": [1], "b": [0]}


async def test_a_groups_configs_set_its_members_timeouts(state: BrokerState) -> None:
    """KIP-848 group configs: a group's ``consumer.heartbeat.interval.ms`` is what its members
    are told, its ``consumer.session.timeout.ms`` how long they live without a heartbeat; other
    groups keep the broker's (5 s, 45 s); a change applies at the next heartbeat."""
    from strata.broker.group import group_config_resource

    await group_config_resource.alter(state.topic_store, state.config, "g", {
        "consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "55000"},
        validate_only=False)
    answer = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join("m1"))
    assert answer.heartbeat_interval.total_seconds() == 7
    other = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                             join("o1", group_id="other"))
    assert other.heartbeat_interval.total_seconds() == 5
    clock = state.clock
    assert isinstance(clock, ManualClock)
    clock.advance(50_000)  # past the broker's 45 s, inside the group's 55 s
    state.group_coordinator.tick()
    group = state.group_coordinator.consumer_groups.group("g")
    assert group is not None and list(group.members) == ["m1"]
    gone = state.group_coordinator.consumer_groups.group("other")
    assert gone is not None and gone.members == {}
    await group_config_resource.alter(state.topic_store, state.config, "g", {
        "consumer.heartbeat.interval.ms": "6000"}, validate_only=False)
    again = await round_trip(state, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat("m1", 1))
    assert again.heartbeat_interval.total_seconds() == 6
    clock.advance(46_000)  # the session is the broker's 45 s again
    state.group_coordinator.tick()
    assert list(group.members) == []
