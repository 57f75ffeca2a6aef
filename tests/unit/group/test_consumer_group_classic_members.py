"""The timers of classic members inside a consumer group (online migration), pure, on numbers
for time: the sync timeout after a JoinGroup, the join timeout after a REBALANCE_IN_PROGRESS,
each the member's rebalance timeout, and the session the member's own ``session.timeout.ms``
(Kafka's ``scheduleConsumerGroupSyncTimeout`` / ``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""

from __future__ import annotations

import pytest

from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_classic_members import ClassicMembers
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
)
from strata.broker.group.consumer_protocol import encode_subscription
from strata.broker.group.member import UNKNOWN_MEMBER_ID, JoinGroupResult
from strata.broker.group.membership import JoinRequest
from strata.protocol.error_codes import ErrorCode
from tests.unit.group.consumer_group_sim import TOPIC, TOPICS, Client

SESSION_MS = 20_000
REBALANCE_MS = 5_000


@pytest.fixture
def membership() -> ConsumerGroupMembership:
    return ConsumerGroupMembership(ConsumerGroupConfig())  # consumer sessions: 45 s


def join(members: ClassicMembers, group: ConsumerGroup, now: float,
         member_id: str = UNKNOWN_MEMBER_ID) -> JoinGroupResult:
    request = JoinRequest(
        member_id, None, require_known_member_id=False, client_id="c", client_host="h",
        rebalance_timeout_ms=REBALANCE_MS, session_timeout_ms=SESSION_MS,
        protocol_type="consumer", protocols=(("range", encode_subscription([TOPIC.name])),))
    result = members.join(group, request, now, TOPICS)
    assert result.error == ErrorCode.none, result
    return result


def sync(members: ClassicMembers, group: ConsumerGroup, joined: JoinGroupResult,
         now: float) -> ErrorCode:
    names = {TOPIC.topic_id: TOPIC.name}
    return members.sync(group, joined.generation_id, joined.member_id, None, "consumer",
                        "range", names, now).error


def expire(membership: ConsumerGroupMembership, group: ConsumerGroup, now: float) -> list[str]:
    return membership.expire_due(group, now)


def test_a_classic_member_that_never_syncs_is_removed_after_its_rebalance_timeout(
        membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    members = ClassicMembers(membership)
    Client("b").heartbeat(membership, group, 0)
    silent = join(members, group, 1_000)
    synced = join(members, group, 1_000)
    assert sync(members, group, synced, 2_000) == ErrorCode.none  # cancels its sync timeout
    assert membership.next_deadline(group) == 1_000 + REBALANCE_MS
    assert expire(membership, group, 1_000 + REBALANCE_MS - 1) == []
    epoch = group.group_epoch
    assert expire(membership, group, 1_000 + REBALANCE_MS) == [silent.member_id]
    assert silent.member_id not in group.members and group.group_epoch == epoch + 1
    # The member that synced lives by its own session.timeout.ms, not group.consumer's 45 s.
    assert members.heartbeat(group, synced.member_id, None, synced.generation_id,
                             10_000) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert group.session_deadlines[synced.member_id] == 10_000 + SESSION_MS


def test_a_classic_member_told_to_rejoin_must_rejoin_within_its_rebalance_timeout(
        membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    members = ClassicMembers(membership)
    first, second = join(members, group, 0), join(members, group, 0)
    first = join(members, group, 0, first.member_id)  # both at the group epoch
    for joined in (first, second):
        assert sync(members, group, joined, 0) == ErrorCode.none
    Client("b").heartbeat(membership, group, 1_000)  # the group epoch moves on
    a, c = first.member_id, second.member_id
    for member_id, generation in ((a, first.generation_id), (c, second.generation_id)):
        assert members.heartbeat(group, member_id, None, generation, 2_000) \
            == ErrorCode.rebalance_in_progress
    # A heartbeats on but never rejoins: its session lives, its join deadline does not move.
    assert members.heartbeat(group, a, None, first.generation_id, 6_000) \
        == ErrorCode.rebalance_in_progress
    rejoined = join(members, group, 3_000, c)  # C rejoins (and syncs) in time
    assert sync(members, group, rejoined, 3_500) == ErrorCode.none
    assert expire(membership, group, 2_000 + REBALANCE_MS - 1) == []
    assert expire(membership, group, 2_000 + REBALANCE_MS) == [a]
    assert a not in group.members and c in group.members
    assert expire(membership, group, 3_000 + REBALANCE_MS + 1) == []


def test_a_stale_sync_starts_the_join_timeout(membership: ConsumerGroupMembership) -> None:
    group = ConsumerGroup("g")
    members = ClassicMembers(membership)
    joined = join(members, group, 0)
    assert sync(members, group, joined, 0) == ErrorCode.none
    Client("b").heartbeat(membership, group, 1_000)
    assert sync(members, group, joined, 2_000) == ErrorCode.rebalance_in_progress
    assert expire(membership, group, 2_000 + REBALANCE_MS - 1) == []
    assert expire(membership, group, 2_000 + REBALANCE_MS) == [joined.member_id]


def test_a_rebalance_deadline_the_member_moved_past_is_dropped_when_due(
        membership: ConsumerGroupMembership) -> None:
    """A classic member has no rebalance timer of its own, but a reloaded group gives one to
    each member revoking partitions (Kafka's ``onLoaded``); the classic requests never cancel
    it, so once the member left that epoch it must not keep the timers waking."""
    group = ConsumerGroup("g")
    members = ClassicMembers(membership)
    joined = join(members, group, 0)
    assert sync(members, group, joined, 0) == ErrorCode.none
    group.rebalance_deadlines[joined.member_id] = (1_000, joined.generation_id - 1)
    assert expire(membership, group, 1_000) == []
    assert joined.member_id in group.members
    assert membership.next_deadline(group) == SESSION_MS  # not 1_000 again and again
