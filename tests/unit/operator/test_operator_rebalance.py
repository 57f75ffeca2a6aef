"""The rebalance state machine (``rebalance.py``): what starts one, and its steps against an
in-memory cluster whose controller carries out a batch only when told to (so the waits are
seen): Pending until the new brokers register, one batch per pass, a dropped batch re-sent,
the preferred-leader election at the end, a refusal kept as a message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from strata.operator import rebalance
from strata.operator.balance import spread
from strata.operator.kafka import KafkaOperationError
from strata.operator.throttle import ThrottlePlan

TP = tuple[str, int]


def test_what_starts_a_rebalance() -> None:
    assert rebalance.trigger(None, {}, 3, 5, False)["reason"] == "ScaleUp"
    assert rebalance.trigger(None, {}, 0, 5, False) is None  # a new Broker: nothing to move
    assert rebalance.trigger(None, {"strata.dev/rebalance": "true"}, 3, 3,
                             False)["reason"] == "Requested"
    assert rebalance.trigger(None, {"strata.dev/rebalance": "false"}, 3, 3, False) is None
    assert rebalance.trigger(None, {}, 5, 3, True)["reason"] == "ScaleDown"
    assert rebalance.trigger({"state": "Done"}, {}, 3, 5, False)["state"] == "Pending"
    assert rebalance.trigger({"state": "Moving"}, {}, 3, 5, False) is None  # one at a time


class Cluster:
    def __init__(self, brokers: Sequence[int], assignment: dict[TP, tuple[int, ...]]) -> None:
        self.registered = {b: None for b in brokers}
        self.assignment_now = dict(assignment)
        self.leader = {tp: r[0] for tp, r in assignment.items()}
        self.pending: dict[TP, tuple[int, ...]] = {}
        self.sent: list[dict[TP, tuple[int, ...]]] = []
        self.elected: list[TP] = []
        self.refuse_election = False
        self.throttles: list[ThrottlePlan] = []  # in force
        self.throttle_log: list[tuple[str, ThrottlePlan]] = []

    def racks(self) -> dict[int, str | None]:
        return dict(self.registered)

    def ongoing_reassignments(self) -> set[TP]:
        return set(self.pending)

    def assignment(self) -> dict[TP, tuple[int, ...]]:
        return dict(self.assignment_now)

    def reassign(self, plan: Mapping[TP, tuple[int, ...]]) -> bool:
        self.sent.append(dict(plan))
        self.pending.update(plan)
        return True

    def finish(self) -> None:
        """The controller completes what it was asked."""
        self.assignment_now.update(self.pending)
        self.pending.clear()

    def leaders(self) -> dict[TP, int]:
        return dict(self.leader)

    def set_throttle(self, plan: ThrottlePlan) -> None:
        self.throttles.append(plan)
        self.throttle_log.append(("set", plan))

    def clear_throttle(self, plan: ThrottlePlan) -> None:
        self.throttles = [p for p in self.throttles if p != plan]
        self.throttle_log.append(("clear", plan))

    def elect_preferred_leaders(self, partitions: Sequence[TP]) -> None:
        if self.refuse_election:
            raise KafkaOperationError("ElectLeaders refused t-0: PREFERRED_LEADER_NOT_AVAILABLE")
        self.elected.extend(partitions)
        for tp in partitions:
            self.leader[tp] = self.assignment_now[tp][0]


def step(cluster: Cluster, status: dict[str, Any], replicas: int = 5) -> rebalance.Step:
    return rebalance.advance(cluster, status, replicas, 4,  # type: ignore[arg-type]
                             scaling_down=False)


def test_scale_up_waits_for_the_brokers_then_moves_one_batch_at_a_time() -> None:
    layout = {("t", p): tuple((p + i) % 3 for i in range(3)) for p in range(10)}
    cluster = Cluster([0, 1, 2], layout)
    status = rebalance.trigger(None, {}, 3, 5, False)
    assert status is not None
    waiting = step(cluster, status)
    assert waiting.status["state"] == "Pending" and "[3, 4]" in waiting.status["message"]
    assert waiting.event is None and not cluster.sent
    cluster.registered.update({3: None, 4: None})
    state = step(cluster, status)
    batches = 1
    while state.status["state"] != "Done":
        assert state.status["state"] == "Moving"
        assert len(cluster.sent[-1]) <= 4
        held = step(cluster, state.status)  # the controller has not finished: wait
        assert len(cluster.sent) == batches and "still moving" in held.status["message"]
        cluster.finish()
        state = step(cluster, held.status)
        if state.status["state"] == "Moving":
            batches += 1
    assert state.status["batchesDone"] == state.status["batchesTotal"] == batches >= 2
    assert "inFlight" not in state.status
    assert spread(range(5), cluster.assignment_now) in ((0, 0), (0, 1), (1, 0), (1, 1))
    assert set(cluster.elected) == {tp for tp, r in cluster.assignment_now.items()
                                    if r[0] != layout[tp][0]}
    assert state.event is not None and "balanced over brokers [0, 1, 2, 3, 4]" in state.event


def test_a_batch_the_controller_dropped_is_sent_again() -> None:
    cluster = Cluster([0, 1], {("t", p): (0,) for p in range(4)})
    status = rebalance.trigger(None, {"strata.dev/rebalance": "true"}, 2, 2, False)
    assert status is not None
    moving = step(cluster, status, replicas=2)
    cluster.pending.clear()  # dropped: nothing ongoing, the assignment unchanged
    again = step(cluster, moving.status, replicas=2)
    assert cluster.sent == [cluster.sent[0], cluster.sent[0]]
    assert again.status["batchesDone"] == 1


def test_a_refused_election_keeps_the_rebalance_going() -> None:
    cluster = Cluster([0, 1], {("t", 0): (0, 1), ("t", 1): (0, 1)})
    cluster.refuse_election = True
    status = rebalance.trigger(None, {"strata.dev/rebalance": "true"}, 2, 2, False)
    assert status is not None
    moving = step(cluster, status, replicas=2)  # reorder (1, 0): leaders even
    cluster.finish()
    with pytest.raises(KafkaOperationError, match="PREFERRED_LEADER_NOT_AVAILABLE"):
        step(cluster, moving.status, replicas=2)
    cluster.refuse_election = False
    assert step(cluster, moving.status, replicas=2).status["state"] == "Done"
    assert cluster.elected == [("t", 0)] or cluster.elected == [("t", 1)]


def test_the_condition_follows_the_state() -> None:
    moving = rebalance.condition({"state": "Moving", "reason": "ScaleUp", "message": "batch 1"},
                                 3, [])
    assert (moving["status"], moving["reason"], moving["message"]) == (
        "True", "Rebalancing", "ScaleUp: batch 1")
    done = rebalance.condition({"state": "Done", "reason": "ScaleUp", "message": "ok"}, 3, [])
    assert (done["status"], done["reason"]) == ("False", "RebalanceComplete")


def test_each_batch_is_throttled_and_its_throttles_removed_once_it_is_done() -> None:
    layout = {("t", p): (0, 1) for p in range(6)}
    cluster = Cluster([0, 1, 2], layout)
    status = rebalance.trigger(None, {"strata.dev/rebalance": "true"}, 3, 3, False)
    assert status is not None
    state = rebalance.advance(cluster, status, 3, 2, scaling_down=False,  # type: ignore[arg-type]
                              throttle=1_000)
    assert state.status["state"] == "Moving" and len(cluster.throttles) == 1
    (first,) = cluster.throttles
    batch = cluster.sent[-1]
    assert first.rate == 1_000 and set(first.brokers) == {0, 1, 2}
    assert ThrottlePlan.from_status(state.status["throttle"]) == first  # survives a restart
    moving = {tp for tp, target in batch.items() if target != layout[tp]}
    assert first.topics["t"]["leader.replication.throttled.replicas"] == ",".join(
        f"{p}:{b}" for _, p in sorted(moving) for b in (0, 1))
    # Still moving: the throttles stay.
    held = rebalance.advance(cluster, state.status, 3, 2, scaling_down=False,  # type: ignore[arg-type]
                             throttle=1_000)
    assert cluster.throttles == [first] and held.status["throttle"]
    cluster.finish()
    # An operator restarted mid-batch knows only the status: it removes the throttles of the
    # finished batch, then throttles the next one.
    restarted = dict(held.status)
    after = rebalance.advance(cluster, restarted, 3, 2, scaling_down=False,  # type: ignore[arg-type]
                              throttle=1_000)
    assert cluster.throttle_log[1] == ("clear", first)
    while after.status["state"] != "Done":
        cluster.finish()
        after = rebalance.advance(cluster, after.status, 3, 2,  # type: ignore[arg-type]
                                  scaling_down=False, throttle=1_000)
    assert cluster.throttles == [] and "throttle" not in after.status
    sets = [p for kind, p in cluster.throttle_log if kind == "set"]
    assert len(sets) == after.status["batchesDone"]


def test_without_a_throttle_nothing_is_set() -> None:
    cluster = Cluster([0, 1, 2], {("t", p): (0, 1) for p in range(4)})
    status = rebalance.trigger(None, {"strata.dev/rebalance": "true"}, 3, 3, False)
    assert status is not None
    state = rebalance.advance(cluster, status, 3, 2, scaling_down=False,  # type: ignore[arg-type]
                              throttle=0)
    assert state.status["state"] == "Moving" and "throttle" not in state.status
    assert not cluster.throttle_log
