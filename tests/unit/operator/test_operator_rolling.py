"""Rolling-restart and scale-down decisions (pure): one pod at a time, highest ordinal first,
only with every pod ready and no under-replicated partition; unready outdated pods first;
scale-down only after the leaving brokers hold no replica."""

from __future__ import annotations

import pytest

from strata.operator import conditions
from strata.operator.rolling import (
    ClusterHealth,
    PodView,
    decide_roll,
    decide_scale,
    plan_reassignment,
    under_replicated,
)

HEALTHY = ClusterHealth(reachable=True)


def pods(*hashes: str, ready: tuple[bool, ...] | None = None) -> list[PodView]:
    ready = ready or (True,) * len(hashes)
    return [PodView(f"b-{i}", i, r, h) for i, (h, r) in enumerate(zip(hashes, ready,
                                                                      strict=True))]


def never_asked() -> ClusterHealth:
    raise AssertionError("the cluster must not be asked here")


def test_nothing_outdated_all_ready_is_settled() -> None:
    decision = decide_roll(pods("new", "new", "new"), "new", 3, never_asked)
    assert decision.settled and decision.delete is None
    assert decision.reason == conditions.BROKERS_READY


def test_restarts_the_highest_outdated_ordinal_when_healthy() -> None:
    assert decide_roll(pods("old", "old", "old"), "new", 3, lambda: HEALTHY).delete == "b-2"
    assert decide_roll(pods("old", "old", "new"), "new", 3, lambda: HEALTHY).delete == "b-1"
    assert decide_roll(pods("old", "new", "new"), "new", 3, lambda: HEALTHY).delete == "b-0"


def test_waits_while_a_partition_is_under_replicated() -> None:
    health = ClusterHealth(reachable=True, under_replicated=(("orders", 0), ("orders", 3)))
    decision = decide_roll(pods("old", "old", "old"), "new", 3, lambda: health)
    assert decision.delete is None
    assert decision.reason == conditions.WAITING_FOR_IN_SYNC_REPLICAS
    assert "orders-0, orders-3" in decision.message


def test_waits_while_the_cluster_cannot_be_asked() -> None:
    health = ClusterHealth(reachable=False, error="timed out")
    decision = decide_roll(pods("old", "old", "old"), "new", 3, lambda: health)
    assert decision.delete is None and decision.reason == conditions.CLUSTER_UNREACHABLE


def test_waits_for_a_missing_or_terminating_or_unready_pod() -> None:
    missing = decide_roll(pods("old", "new"), "new", 3, never_asked)
    assert missing.delete is None and missing.reason == conditions.PODS_NOT_READY
    terminating = [*pods("old", "old"), PodView("b-2", 2, False, "old", terminating=True)]
    assert decide_roll(terminating, "new", 3, never_asked).delete is None
    unready_updated = pods("old", "old", "new", ready=(True, True, False))
    assert decide_roll(unready_updated, "new", 3, never_asked).delete is None


def test_an_unready_outdated_pod_is_restarted_first_without_asking() -> None:
    stuck = pods("old", "old", "old", ready=(True, False, True))
    decision = decide_roll(stuck, "new", 3, never_asked)
    assert decision.delete == "b-1"


def test_pods_above_replicas_are_ignored() -> None:
    decision = decide_roll(pods("new", "new", "old"), "new", 2, never_asked)
    assert decision.settled


def test_under_replicated_compares_isr_with_replicas() -> None:
    rows = [(("a", 0), [1, 2, 3], [1, 2, 3]), (("a", 1), [1, 2, 3], [1, 3]),
            (("b", 0), [2], [])]
    assert under_replicated(rows) == (("a", 1), ("b", 0))


def test_scale_up_and_same_size_apply_at_once() -> None:
    assert decide_scale(3, 5, None).replicas == 5
    assert decide_scale(3, 3, None).replicas == 3


def test_scale_down_waits_for_the_assignment_and_for_reassignment() -> None:
    assert decide_scale(3, 2, None).replicas == 3
    busy = {("a", 0): (2, 0), ("a", 1): (1, 0)}
    decision = decide_scale(3, 2, busy)
    assert decision.replicas == 3
    assert decision.reassignments == {("a", 0): (1, 0)}
    assert "reassigned" in decision.blocked


def test_scale_down_shrinks_once_no_replica_is_on_leaving_brokers() -> None:
    assert decide_scale(3, 2, {("a", 0): (1, 0), ("a", 1): (0, 1)}) == decide_scale(2, 2, None)


def test_scale_down_below_a_replication_factor_is_refused() -> None:
    decision = decide_scale(3, 1, {("a", 0): (0, 1, 2)})
    assert decision.replicas == 3 and "refused" in decision.blocked


def test_reassignment_replaces_leaving_brokers_with_the_least_loaded() -> None:
    assignment = {("t", 0): (3, 0), ("t", 1): (0, 1), ("t", 2): (1, 3), ("t", 3): (3, 2)}
    plan = plan_reassignment(assignment, {3}, [0, 1, 2])
    assert plan == {("t", 0): (2, 0), ("t", 2): (1, 0), ("t", 3): (1, 2)}
    for replicas in plan.values():
        assert len(set(replicas)) == len(replicas) and 3 not in replicas
    with pytest.raises(ValueError, match="only 1 brokers would remain"):
        plan_reassignment({("t", 0): (0, 1)}, {1}, [0])
