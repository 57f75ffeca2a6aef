"""The server-side assignors ``uniform`` and ``range``: complete, balanced, sticky."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from strata.broker.group.consumer_group_member import Assignment, pairs_of
from strata.broker.group.partition_assignor import MemberSubscription, TopicMetadata
from strata.broker.group.range_assignor import RangeAssignor
from strata.broker.group.uniform_assignor import UniformAssignor

A = TopicMetadata(uuid.UUID(int=1 << 70), "a", 6)
B = TopicMetadata(uuid.UUID(int=2 << 70), "b", 3)
TOPICS = {A.topic_id: A, B.topic_id: B}


def sub(*topics: TopicMetadata, assigned: Assignment | None = None) -> MemberSubscription:
    return MemberSubscription(frozenset(t.topic_id for t in topics), None, assigned or {})


def counts(result: dict[str, Assignment]) -> dict[str, int]:
    return {m: len(pairs_of(a)) for m, a in result.items()}


def test_uniform_homogeneous_is_complete_and_balanced() -> None:
    members = {m: sub(A, B) for m in ("m1", "m2", "m3", "m4")}
    result = UniformAssignor().assign(members, TOPICS)
    owned = [tp for a in result.values() for tp in pairs_of(a)]
    assert len(owned) == len(set(owned)) == 9
    assert sorted(counts(result).values()) == [2, 2, 2, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = UniformAssignor().assign({"m1": sub(A), "m2": sub(A)}, TOPICS)
    members = {m: sub(A, assigned=before.get(m)) for m in ("m1", "m2", "m3")}
    after = UniformAssignor().assign(members, TOPICS)
    assert counts(after) == {"m1": 2, "m2": 2, "m3": 2}
    for m in ("m1", "m2"):  # the old members only lose partitions, never swap them
        assert pairs_of(after[m]) <= pairs_of(before[m])


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {"m1": sub(A), "m2": sub(A, B), "m3": sub(B)}
    result = UniformAssignor().assign(members, TOPICS)
    assert {t for t, _ in pairs_of(result["m1"])} <= {A.topic_id}
    assert {t for t, _ in pairs_of(result["m3"])} <= {B.topic_id}
    assert sum(counts(result).values()) == 9
    assert max(counts(result).values()) - min(counts(result).values()) <= 1


def test_uniform_drops_unsubscribed_and_missing_partitions() -> None:
    gone = uuid.UUID(int=3 << 70)
    members = {"m1": sub(A, assigned={B.topic_id: frozenset({0}), gone: frozenset({1})})}
    result = UniformAssignor().assign(members, TOPICS)
    assert pairs_of(result["m1"]) == {(A.topic_id, p) for p in range(6)}


def test_range_layout_and_co_partitioning() -> None:
    c = TopicMetadata(uuid.UUID(int=4 << 70), "c", 6)
    topics = {A.topic_id: A, c.topic_id: c}
    result = RangeAssignor().assign({"m1": sub(A, c), "m2": sub(A, c), "m3": sub(A, c)},
                                    topics)
    assert result["m1"] == {A.topic_id: frozenset({0, 1}), c.topic_id: frozenset({0, 1})}
    assert result["m3"] == {A.topic_id: frozenset({4, 5}), c.topic_id: frozenset({4, 5})}


def test_range_is_sticky() -> None:
    members = {"m1": sub(A, assigned={A.topic_id: frozenset({3, 4, 5})}), "m2": sub(A)}
    result = RangeAssignor().assign(members, {A.topic_id: A})
    assert result["m1"] == {A.topic_id: frozenset({3, 4, 5})}
    assert result["m2"] == {A.topic_id: frozenset({0, 1, 2})}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "ab"]), min_size=1, max_size=6),
       st.integers(min_value=0, max_value=2**32), st.sampled_from(["uniform", "range"]))
def test_every_subscribed_partition_has_exactly_one_eligible_owner(
        subs: list[str], seed: int, name: str) -> None:
    by_letter = {"a": A, "b": B}
    members = {f"m{i}": sub(*(by_letter[x] for x in s)) for i, s in enumerate(subs)}
    assignor = UniformAssignor() if name == "uniform" else RangeAssignor()
    first = assignor.assign(members, TOPICS)
    # a second round with the first as the sticky base must stay valid
    members = {m: sub(*(by_letter[x] for x in s), assigned=first[m])
               for m, s in zip(members, subs, strict=True)}
    for result in (first, assignor.assign(members, TOPICS)):
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for member_id, assignment in result.items():
            for tp in pairs_of(assignment):
                assert tp not in owners
                assert tp[0] in members[member_id].subscribed_topic_ids
                owners[tp] = member_id
        wanted = {t for s in subs for t in s}
        expected = sum(by_letter[t].num_partitions for t in wanted)
        assert len(owners) == expected


# ------------------------------------------------------------------------ rack-aware
RACKS = ("r0", "r1", "r2")


def racked_topic(name: str, partitions: int, racks: list[frozenset[str]]) -> TopicMetadata:
    return TopicMetadata(uuid.uuid5(uuid.NAMESPACE_DNS, name), name, partitions, tuple(racks))


def on_rack(result: dict[str, Assignment], members: dict[str, MemberSubscription],
            topics: dict[uuid.UUID, TopicMetadata]) -> int:
    return sum(1 for m, a in result.items() for t, p in pairs_of(a)
               if members[m].rack_id in topics[t].racks(p))


def test_uniform_puts_partitions_on_their_members_racks() -> None:
    # partitions 0,1 on r0, 2,3 on r1 (one replica each); members m1 (r1) and m2 (r0)
    topic = racked_topic("t", 4, [frozenset({"r0"})] * 2 + [frozenset({"r1"})] * 2)
    topics = {topic.topic_id: topic}
    members = {"m1": MemberSubscription(frozenset({topic.topic_id}), "r1"),
               "m2": MemberSubscription(frozenset({topic.topic_id}), "r0")}
    result = UniformAssignor().assign(members, topics)
    assert {m: sorted(p for _, p in pairs_of(a)) for m, a in result.items()} \
        == {"m1": [2, 3], "m2": [0, 1]}
    without = {m: MemberSubscription(s.subscribed_topic_ids) for m, s in members.items()}
    assert on_rack(UniformAssignor().assign(without, topics), members, topics) < 4


def test_range_prefers_its_rack_within_its_quota() -> None:
    topic = racked_topic("t", 4, [frozenset({"r1"}), frozenset({"r0"}), frozenset({"r1"}),
                                  frozenset({"r0"})])
    topics = {topic.topic_id: topic}
    members = {"m1": MemberSubscription(frozenset({topic.topic_id}), "r0"),
               "m2": MemberSubscription(frozenset({topic.topic_id}), "r1")}
    result = RangeAssignor().assign(members, topics)
    assert {m: sorted(p for _, p in pairs_of(a)) for m, a in result.items()} \
        == {"m1": [1, 3], "m2": [0, 2]}


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=1, max_value=7), st.integers(min_value=1, max_value=24),
       st.integers(min_value=0, max_value=2**32), st.sampled_from(["uniform", "range"]))
def test_rack_aware_assignment_stays_balanced_sticky_and_matched(
        member_count: int, partitions: int, seed: int, name: str) -> None:
    """Identical subscriptions, racks given: complete, every member within one partition of
    the others, a second round with the first as the base moves nothing, and when every rack
    has as many partitions as members times an equal share, every partition is on its
    member's rack."""
    import random
    rng = random.Random(seed)
    racks = [frozenset({RACKS[rng.randrange(3)]}) for _ in range(partitions)]
    topic = racked_topic("t", partitions, racks)
    topics = {topic.topic_id: topic}
    member_racks = {f"m{i}": RACKS[rng.randrange(3)] for i in range(member_count)}
    members = {m: MemberSubscription(frozenset({topic.topic_id}), r)
               for m, r in member_racks.items()}
    assignor = UniformAssignor() if name == "uniform" else RangeAssignor()
    first = assignor.assign(members, topics)
    owned = [tp for a in first.values() for tp in pairs_of(a)]
    assert len(owned) == len(set(owned)) == partitions
    loads = counts(first).values()
    assert max(loads) - min(loads) <= 1
    again = assignor.assign({m: MemberSubscription(s.subscribed_topic_ids, s.rack_id, first[m])
                             for m, s in members.items()}, topics)
    assert again == first  # sticky: nothing moves when nothing changed
    # a layout that can be fully rack-matched: per rack, members x equal share partitions
    share = rng.randint(1, 3)
    per_rack = [rng.randint(0, 2) for _ in RACKS]
    if sum(per_rack) == 0:
        per_rack[0] = 1
    matched_racks = [frozenset({r}) for r, n in zip(RACKS, per_rack, strict=True)
                     for _ in range(n * share)]
    rng.shuffle(matched_racks)
    matched = racked_topic("u", len(matched_racks), matched_racks)
    matched_topics = {matched.topic_id: matched}
    matched_members = {f"{r}-{i}": MemberSubscription(frozenset({matched.topic_id}), r)
                       for r, n in zip(RACKS, per_rack, strict=True) for i in range(n)}
    result = assignor.assign(matched_members, matched_topics)
    assert on_rack(result, matched_members, matched_topics) == len(matched_racks)
    loads = counts(result).values()
    assert max(loads) - min(loads) <= 1
