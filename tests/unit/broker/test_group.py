"""``ClassicGroup``: members, leader, protocol selection, static members, subscriptions, offsets."""

from __future__ import annotations

import pytest

from strata.broker.group.classic_group import (
    ClassicGroup,
    OffsetAndMetadata,
    consumer_subscription_topics,
)
from strata.broker.group.member import GroupMember, JoinGroupResult, SyncGroupResult
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import consumer_subscription

DAY_MS = 24 * 60 * 60 * 1000


def member(member_id: str, *protocols: str, instance: str | None = None,
           protocol_type: str = "consumer", topics: tuple[str, ...] = ("t",)) -> GroupMember:
    return GroupMember(member_id, instance, "client", "/10.0.0.1", 30_000, 10_000, protocol_type,
                       tuple((p, consumer_subscription(*topics)) for p in protocols))


def test_the_first_member_sets_the_protocol_type_and_leads() -> None:
    group = ClassicGroup("g", ManualClock())
    group.add(member("a", "range"))
    group.add(member("b", "range"))
    assert group.protocol_type == "consumer" and group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None and group.size == 0


def test_protocol_selection_by_vote_among_protocols_every_member_supports() -> None:
    group = ClassicGroup("g", ManualClock())
    group.add(member("a", "roundrobin", "range", "sticky"))
    group.add(member("b", "range", "roundrobin"))
    group.add(member("c", "range", "roundrobin"))
    assert group.select_protocol() == "range"  # sticky is not supported by everyone
    group.remove("c")
    assert group.select_protocol() == "roundrobin"  # a tie: the first vote wins
    assert group.supported_protocols["sticky"] == 1


def test_supports_protocols() -> None:
    group = ClassicGroup("g", ManualClock())
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", "range", "roundrobin"))
    group.transition_to(GroupState.PREPARING_REBALANCE)
    assert group.supports_protocols("consumer", ["sticky", "roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_awaiting_join_count_and_all_joined() -> None:
    group = ClassicGroup("g", ManualClock())
    answers: list[JoinGroupResult] = []
    a, b = member("a", "range"), member("b", "range")
    group.add(a, answers.append)
    group.add(b)
    assert group.num_members_awaiting_join == 1 and not group.has_all_members_joined
    group.update_member(b, b.protocols, 1, 2, answers.append)
    assert group.has_all_members_joined
    group.add_pending_member("p", 0.0)
    assert not group.has_all_members_joined
    del group.pending_members["p"]
    result = JoinGroupResult(ErrorCode.none, "a")
    assert group.maybe_invoke_join_callback(a, result)
    assert not group.maybe_invoke_join_callback(a, result)
    assert answers == [result] and group.num_members_awaiting_join == 1
    group.remove("b")
    assert group.num_members_awaiting_join == 0


def test_a_second_parked_join_of_a_member_answers_the_first() -> None:
    group = ClassicGroup("g", ManualClock())
    first: list[JoinGroupResult] = []
    a = member("a", "range")
    group.add(a, first.append)
    group.update_member(a, a.protocols, 1, 2, lambda _: None)
    assert first == [JoinGroupResult(ErrorCode.rebalance_in_progress, "a")]
    assert group.num_members_awaiting_join == 1


def test_replacing_a_static_member_fences_its_parked_requests() -> None:
    group = ClassicGroup("g", ManualClock())
    joins: list[JoinGroupResult] = []
    syncs: list[SyncGroupResult] = []
    old = member("old", "range", instance="i-1")
    group.add(old, joins.append)
    group.set_sync_callback(old, syncs.append)
    group.pending_sync_members.add("old")
    replaced = group.replace_static_member("i-1", "old", "new")
    assert replaced is old and old.member_id == "new"
    assert joins == [JoinGroupResult(ErrorCode.fenced_instance_id, "old")]
    assert syncs == [SyncGroupResult(ErrorCode.fenced_instance_id)]
    assert group.leader_id == "new" and group.static_member_id("i-1") == "new"
    assert set(group.members) == {"new"} and group.pending_sync_members == {"new"}
    group.remove("new")
    assert group.static_member_id("i-1") is None


def test_leader_election_prefers_a_rejoined_member() -> None:
    group = ClassicGroup("g", ManualClock())
    group.add(member("a", "range"))
    group.add(member("b", "range"), lambda _: None)
    assert group.maybe_elect_new_joined_leader() and group.leader_id == "b"
    group.remove("b")
    assert not group.maybe_elect_new_joined_leader()  # a has not rejoined


def test_next_generation_selects_the_protocol_and_subscriptions() -> None:
    clock = ManualClock()
    group = ClassicGroup("g", clock)
    group.add(member("a", "range", topics=("t", "u")))
    group.add(member("b", "range", topics=("v",)))
    group.transition_to(GroupState.PREPARING_REBALANCE)
    clock.advance(5)
    group.init_next_generation()
    assert group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == 1
    assert group.protocol_name == "range" and group.subscribed_topics == {"t", "u", "v"}
    assert group.current_state_timestamp == clock.milliseconds()
    assert [m.member_id for m in group.current_member_metadata()] == ["a", "b"]


def test_empty_generation() -> None:
    group = ClassicGroup("g", ManualClock())
    group.protocol_type = "consumer"
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.state is GroupState.EMPTY and group.protocol_name is None
    assert group.subscribed_topics == frozenset()


@pytest.mark.parametrize("version", [0, 1, 3])
def test_consumer_subscription_topics(version: int) -> None:
    data = consumer_subscription("orders", "payments", version=version)
    assert consumer_subscription_topics(data) == ["orders", "payments"]


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x00\x00\x05", b"\xff\xff",
                                  b"\x00\x00\x00\x00\x00\x01\x00\x09ab"])
def test_unreadable_subscriptions(data: bytes) -> None:
    assert consumer_subscription_topics(data) is None


def test_non_consumer_groups_have_unknown_subscriptions() -> None:
    group = ClassicGroup("g", ManualClock())
    group.add(member("a", "v0", protocol_type="connect"))
    group.protocol_name = "v0"
    assert group.compute_subscribed_topics() is None
    assert not group.is_subscribed_to_topic("t")


def test_member_ids_follow_kafkas_format() -> None:
    group = ClassicGroup("g", ManualClock())
    assert group.generate_member_id("app", None).startswith("app-")
    assert group.generate_member_id("app", "host-1").startswith("host-1-")
    assert len(group.generate_member_id("c", None)) == len("c-") + 36


def test_summary_shows_metadata_only_when_stable() -> None:
    group = ClassicGroup("g", ManualClock())
    a = member("a", "range")
    a.assignment = b"assigned"
    group.add(a)
    group.protocol_name = "range"
    summary = group.summary()
    assert summary.state == "Empty" and summary.protocol_name == ""
    assert summary.members[0].metadata == b"" and summary.members[0].assignment == b""
    group.state = GroupState.STABLE
    summary = group.summary()
    assert (summary.state, summary.protocol_type, summary.protocol_name) == (
        "Stable", "consumer", "range")
    assert summary.members[0].assignment == b"assigned"
    assert summary.members[0].client_host == "/10.0.0.1"


# ------------------------------------------------------------------- offset expiration


def committed(at: int, expire: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(5, -1, "", at, expire)


def test_an_empty_groups_offsets_expire_after_it_became_empty() -> None:
    clock = ManualClock()
    group = ClassicGroup("g", clock)
    group.protocol_type = "consumer"
    now = clock.milliseconds()
    group.offsets = {("t", 0): committed(now - 30 * DAY_MS)}
    group.current_state_timestamp = now - DAY_MS  # emptied a day ago
    assert group.expired_offsets(now, 7 * DAY_MS) == []
    assert group.expired_offsets(now + 6 * DAY_MS, 7 * DAY_MS) == [("t", 0)]
    group.current_state_timestamp = None  # old metadata: the commit time counts
    assert group.expired_offsets(now, 7 * DAY_MS) == [("t", 0)]


def test_a_stable_consumer_group_keeps_offsets_of_subscribed_topics() -> None:
    clock = ManualClock()
    group = ClassicGroup("g", clock)
    group.add(member("a", "range", topics=("t",)))
    group.protocol_name = "range"
    group.state = GroupState.STABLE
    group.subscribed_topics = group.compute_subscribed_topics()
    now = clock.milliseconds()
    group.offsets = {("t", 0): committed(now - 30 * DAY_MS),
                     ("old", 0): committed(now - 8 * DAY_MS), ("new", 0): committed(now - DAY_MS)}
    assert group.expired_offsets(now, 7 * DAY_MS) == [("old", 0)]
    group.state = GroupState.PREPARING_REBALANCE  # other states keep everything
    assert group.expired_offsets(now, 7 * DAY_MS) == []


def test_simple_groups_expire_each_offset_after_its_commit() -> None:
    clock = ManualClock()
    group = ClassicGroup("g", clock)
    now = clock.milliseconds()
    group.offsets = {("t", 0): committed(now - 8 * DAY_MS), ("t", 1): committed(now),
                     ("t", 2): committed(now, expire=now + 10), ("t", 3): committed(now, now)}
    assert group.expired_offsets(now, 7 * DAY_MS) == [("t", 0), ("t", 3)]
    assert group.remove_offsets([("t", 0), ("x", 9)]) == [("t", 0)]
    assert sorted(group.remove_all_offsets()) == [("t", 1), ("t", 2), ("t", 3)]
    assert not group.has_offsets()


def test_load_builds_a_stable_or_empty_group() -> None:
    clock = ManualClock()
    a = member("a", "range", instance="i")
    group = ClassicGroup.load("g", clock, protocol_type="consumer", generation_id=4,
                              protocol_name="range", leader_id="gone",
                              current_state_timestamp=7, members=[a])
    assert group.state is GroupState.STABLE and group.leader_id == "a"
    assert group.static_member_id("i") == "a" and group.subscribed_topics == {"t"}
    assert group.current_state_timestamp == 7 and group.generation_id == 4
    empty = ClassicGroup.load("h", clock, protocol_type="consumer", generation_id=2,
                              protocol_name=None, leader_id=None, current_state_timestamp=None,
                              members=[])
    assert empty.state is GroupState.EMPTY and empty.leader_id is None
