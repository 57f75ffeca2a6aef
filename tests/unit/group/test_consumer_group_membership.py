"""ConsumerGroupHeartbeat on one group: joins, revoke-before-assign, fencing, static members,
timers — pure, on numbers for time."""

from __future__ import annotations

import dataclasses

import pytest

from strata.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from strata.broker.group.consumer_group_member import MemberState, pairs_of
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    HeartbeatRequest,
)
from strata.protocol.error_codes import ErrorCode
from tests.unit.group.consumer_group_sim import TOPIC, TOPICS, Client


@pytest.fixture
def membership() -> ConsumerGroupMembership:
    return ConsumerGroupMembership(ConsumerGroupConfig())


def test_first_member_gets_everything_at_epoch_1(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1 = Client("m1")
    result = c1.heartbeat(membership, group, 0)
    assert result.error == ErrorCode.none
    assert result.member_epoch == 1 and group.group_epoch == 1
    assert result.heartbeat_interval_ms == 5000
    assert len(c1.latest) == 12
    assert group.state is ConsumerGroupState.STABLE


def test_second_member_waits_for_revocation(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    c1.heartbeat(membership, group, 0)
    first = c2.heartbeat(membership, group, 1)
    # m2 is at epoch 2 but every partition of its target is still m1's: unreleased.
    assert first.member_epoch == 2 and not c2.latest
    assert group.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    c1.heartbeat(membership, group, 2)  # told to revoke half, still epoch 1
    assert c1.epoch == 1 and len(c1.latest) == 6
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert c2.heartbeat(membership, group, 3).assignment is None  # not yet released
    c1.heartbeat(membership, group, 4)  # acknowledges: epoch 2
    assert c1.epoch == 2
    c2.heartbeat(membership, group, 5)
    assert len(c2.latest) == 6 and not c1.latest & c2.latest
    assert group.state is ConsumerGroupState.STABLE


def test_heartbeat_without_owned_partitions_proves_no_revocation(
        membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    c1.heartbeat(membership, group, 0)
    c2.heartbeat(membership, group, 0)
    c1.heartbeat(membership, group, 0)
    lazy = membership.heartbeat(group, HeartbeatRequest("m1", 1), 0, TOPICS)
    assert lazy.member_epoch == 1
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS


def test_fencing_and_unknown_members(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    Client("m1").heartbeat(membership, group, 0)
    assert membership.heartbeat(group, HeartbeatRequest("zz", 1), 0, TOPICS).error \
        == ErrorCode.unknown_member_id
    assert membership.heartbeat(group, HeartbeatRequest("m1", 5), 0, TOPICS).error \
        == ErrorCode.fenced_member_epoch
    assert membership.heartbeat(group, HeartbeatRequest("m1", 0, owned=[]), 0, TOPICS).error \
        == ErrorCode.none  # epoch 0 again: the same member rejoining


def test_previous_epoch_accepted_while_it_owns_nothing_extra(
        membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    for now in range(3):
        c1.heartbeat(membership, group, now)
        c2.heartbeat(membership, group, now)
    member = group.members["m1"]
    assert (member.member_epoch, member.previous_member_epoch) == (2, 1)
    mine = sorted(pairs_of(member.assigned_partitions))
    theirs = sorted(pairs_of(group.members["m2"].assigned_partitions))
    lost_answer = HeartbeatRequest("m1", 1, owned=mine)
    assert membership.heartbeat(group, lost_answer, 3, TOPICS).member_epoch == 2
    stale = HeartbeatRequest("m1", 1, owned=mine + theirs[:1])
    assert membership.heartbeat(group, stale, 3, TOPICS).error == ErrorCode.fenced_member_epoch


def test_request_validation(membership: ConsumerGroupMembership) -> None:
    ok = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",))
    assert membership.validate_request("g", ok) is None
    cases = [
        ("", ok, ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, member_id=""), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, rebalance_timeout_ms=-1), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, subscribed_topic_names=None), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, owned=[(TOPIC.topic_id, 0)]), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, instance_id=""), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, member_epoch=-3), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, member_epoch=-2), ErrorCode.invalid_request),
        ("g", dataclasses.replace(ok, server_assignor="sticky"), ErrorCode.unsupported_assignor),
        ("g", dataclasses.replace(ok, subscribed_topic_regex="(a"),
         ErrorCode.invalid_regular_expression),
    ]
    for group_id, request, error in cases:
        found = membership.validate_request(group_id, request)
        assert found is not None and found[0] == error, request


def test_group_max_size() -> None:
    membership = ConsumerGroupMembership(ConsumerGroupConfig(max_size=1))
    group = ConsumerGroup("g")
    Client("m1").heartbeat(membership, group, 0)
    assert Client("m2").heartbeat(membership, group, 0).error == ErrorCode.group_max_size_reached


def test_leave_gives_partitions_to_the_others(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    for now in range(4):
        c1.heartbeat(membership, group, now)
        c2.heartbeat(membership, group, now)
    assert c2.leave(membership, group).member_epoch == -1
    c1.heartbeat(membership, group, 10)
    assert len(c1.latest) == 12 and group.state is ConsumerGroupState.STABLE


def test_static_member_leaves_for_now_and_rejoins(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1", "i1"), Client("m2", "i2")
    for now in range(4):
        c1.heartbeat(membership, group, now)
        c2.heartbeat(membership, group, now)
    held, epoch = set(c2.latest), group.group_epoch
    assert c2.leave(membership, group, epoch=-2).member_epoch == -2
    c1.heartbeat(membership, group, 5)
    assert len(c1.latest) == 6 and group.group_epoch == epoch  # nothing moved
    # another instance id cannot take i1 while it is in use
    assert Client("m9", "i1").heartbeat(membership, group, 6).error \
        == ErrorCode.unreleased_instance_id
    c3 = Client("m3", "i2")  # the restarted instance of i2
    c3.heartbeat(membership, group, 7)
    assert c3.latest == held and group.group_epoch == epoch
    assert "m2" not in group.members


def test_session_timeout_removes_a_member(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    for now in range(4):
        c1.heartbeat(membership, group, now)
        c2.heartbeat(membership, group, now)
    assert membership.next_deadline(group) == 3 + 45_000
    c1.heartbeat(membership, group, 40_000)
    assert membership.expire_due(group, 45_003) == ["m2"]
    c1.heartbeat(membership, group, 45_004)
    assert len(c1.latest) == 12
    assert c2.heartbeat(membership, group, 45_005).error == ErrorCode.unknown_member_id


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(
        membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    c1.heartbeat(membership, group, 0)
    c2.heartbeat(membership, group, 0)
    membership.heartbeat(group, HeartbeatRequest("m1", 1), 1, TOPICS)  # never acknowledges
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert membership.expire_due(group, 30_001) == ["m1"]
    c2.heartbeat(membership, group, 30_002)
    assert len(c2.latest) == 12


def test_offset_commit_and_fetch_validation(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    assert membership.validate_offset_commit(group, "", -1) == ErrorCode.none
    Client("m1").heartbeat(membership, group, 0)
    assert membership.validate_offset_commit(group, "", -1) == ErrorCode.unknown_member_id
    assert membership.validate_offset_commit(group, "m1", 1) == ErrorCode.none
    assert membership.validate_offset_commit(group, "m1", 0) == ErrorCode.stale_member_epoch
    assert membership.validate_offset_fetch(group, None, -1) == ErrorCode.none
    assert membership.validate_offset_fetch(group, "m1", 2) == ErrorCode.stale_member_epoch
    assert membership.validate_offset_fetch(group, "zz", 1) == ErrorCode.unknown_member_id


def test_regex_subscription_follows_new_topics(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    request = HeartbeatRequest("m1", 0, rebalance_timeout_ms=1000,
                               subscribed_topic_regex="orders-.*")
    topics = dict(TOPICS)
    assert membership.heartbeat(group, request, 0, topics).assignment == {}
    new = dataclasses.replace(TOPIC, name="orders-eu")
    topics["orders-eu"] = new
    result = membership.heartbeat(group, HeartbeatRequest("m1", 1, owned=[]), 1, topics)
    assert result.member_epoch == 2
    assert result.assignment is not None and len(pairs_of(result.assignment)) == 12
