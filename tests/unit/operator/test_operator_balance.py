"""The self-balancing planner (``balance.py``): properties over generated clusters (even within
±1, rack spread never lowered, only the moves an even result needs, every partition keeps its
replication factor and distinct replicas) and the cases an operator meets: 3 -> 5 brokers,
racks, a skewed leadership after a drain, batches."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.operator.balance import (
    TopicPartition,
    _racks,
    batches,
    fair_share,
    plan_balance,
    spread,
)

Layout = dict[TopicPartition, tuple[int, ...]]


def apply(assignment: Layout, plan: dict[TopicPartition, tuple[int, ...]]) -> Layout:
    return {**assignment, **plan}


def least_moves(brokers: list[int], assignment: Layout) -> int:
    """The fewest replica moves any plan reaching ±1 needs: the excess above the fair share
    (with the brokers allowed at the ceiling taken by the fullest)."""
    counts = Counter({b: 0 for b in brokers})
    for replicas in assignment.values():
        counts.update(replicas)
    low, high = fair_share(sum(counts.values()), len(brokers))
    at_high = sum(counts.values()) - low * len(brokers)
    excess = 0
    for i, count in enumerate(sorted(counts.values(), reverse=True)):
        cap = high if i < at_high else low
        excess += max(0, count - cap)
    return excess


@st.composite
def clusters(draw: st.DrawFn, racked: bool = False, one_factor: bool = False
             ) -> tuple[dict[int, str | None], Layout]:
    """``one_factor``: every topic has the same replication factor, at least 2 when the
    brokers allow it (a cluster with default.replication.factor)."""
    brokers = draw(st.integers(min_value=1, max_value=7))
    rack_count = draw(st.integers(min_value=1, max_value=3)) if racked else 0
    racks = {b: (f"zone-{b % rack_count}" if racked else None) for b in range(brokers)}
    layout: Layout = {}
    common = draw(st.integers(min_value=min(2, brokers), max_value=brokers))
    for topic in range(draw(st.integers(min_value=1, max_value=3))):
        factor = common if one_factor else draw(st.integers(min_value=1, max_value=brokers))
        for partition in range(draw(st.integers(min_value=1, max_value=12))):
            replicas = draw(st.permutations(list(range(brokers))))[:factor]
            layout[(f"t{topic}", partition)] = tuple(replicas)
    return racks, layout


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_even_within_one_with_the_fewest_moves(cluster: tuple[dict[int, str | None], Layout]
                                               ) -> None:
    racks, layout = cluster
    plan = plan_balance(racks, layout)
    after = apply(layout, plan.reassignments)
    assert spread(sorted(racks), after)[0] <= 1
    assert plan.replica_moves == least_moves(sorted(racks), layout)
    for tp, replicas in after.items():
        assert len(replicas) == len(layout[tp]) == len(set(replicas))
        # No partition loses a replica it did not need to: every replica that left was on a
        # broker above its fair share before.
    assert sum(len(set(layout[tp]) - set(r)) for tp, r in after.items()) == plan.replica_moves
    assert plan_balance(racks, after).empty  # balanced stays balanced


@settings(max_examples=300, deadline=None)
@given(clusters(one_factor=True))
def test_leaders_even_within_one_when_topics_share_a_replication_factor(
        cluster: tuple[dict[int, str | None], Layout]) -> None:
    racks, layout = cluster
    after = apply(layout, plan_balance(racks, layout).reassignments)
    assert spread(sorted(racks), after) in ((0, 0), (0, 1), (1, 0), (1, 1))


@settings(max_examples=200, deadline=None)
@given(clusters(racked=True))
def test_racks_spread_is_never_lowered(cluster: tuple[dict[int, str | None], Layout]) -> None:
    racks, layout = cluster
    after = apply(layout, plan_balance(racks, layout).reassignments)
    for tp, replicas in after.items():
        assert _racks(replicas, racks) >= _racks(layout[tp], racks)


def test_three_to_five_brokers_fills_the_new_ones() -> None:
    layout: Layout = {("orders", p): tuple((p + i) % 3 for i in range(3)) for p in range(10)}
    racks: dict[int, str | None] = dict.fromkeys(range(5))
    plan = plan_balance(racks, layout)
    after = apply(layout, plan.reassignments)
    counts = Counter(b for replicas in after.values() for b in replicas)
    assert sorted(counts.values()) == [6, 6, 6, 6, 6]
    leaders = Counter(replicas[0] for replicas in after.values())
    assert sorted(leaders.values()) == [2, 2, 2, 2, 2]
    assert plan.replica_moves == 12  # 30 replicas: 10 on each old broker, 6 wanted


def test_a_skewed_leadership_after_a_drain_is_fixed_by_reordering_only() -> None:
    layout: Layout = {("t", 0): (0, 1), ("t", 1): (0, 1), ("t", 2): (0, 1), ("t", 3): (1, 0)}
    plan = plan_balance({0: None, 1: None}, layout)
    assert plan.replica_moves == 0
    assert plan.leader_changes == 1
    assert spread([0, 1], apply(layout, plan.reassignments)) == (0, 0)


def test_racks_are_kept_distinct() -> None:
    racks: dict[int, str | None] = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}
    layout: Layout = {("t", p): (0, 1, 2) for p in range(6)}
    after = apply(layout, plan_balance(racks, layout).reassignments)
    for replicas in after.values():
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    assert spread(sorted(racks), after) == (0, 0)


def test_partitions_on_unknown_brokers_are_left_to_the_scale_down() -> None:
    layout: Layout = {("t", 0): (0, 9), ("t", 1): (0, 1)}
    assert ("t", 0) not in plan_balance({0: None, 1: None, 2: None}, layout).reassignments


def test_batches_cut_the_plan_in_partition_order() -> None:
    plan = {("t", p): (p,) for p in (3, 1, 2, 0, 4)}
    assert [list(b) for b in batches(plan, 2)] == [[("t", 0), ("t", 1)], [("t", 2), ("t", 3)],
                                                   [("t", 4)]]
    with pytest.raises(ValueError, match="batch size"):
        batches(plan, 0)
