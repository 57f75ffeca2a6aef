"""A scale-down's drain (``drain.py``): the pure step decision, then passes against the in-memory
API server and cluster of the rebalance tests (whose controller carries out a batch only when
told to): throttled batches one at a time, the throttles cleared once the batch is done (also
by an operator restarted mid-batch), cleared again when the batch is refused; the drain waits
for a running ``Rebalance`` unless it started first, and a ``Rebalance`` sees a running drain
as another rebalance of the Broker; the Broker CRD keeps ``status.scaleDown`` (not pruned)."""

from __future__ import annotations

from typing import Any

import pytest

from strata.operator import broker, conditions, drain, rebalance_handler
from strata.operator.kafka import KafkaOperationError
from strata.operator.model import BrokerSpec
from strata.operator.throttle import LEADER_REPLICAS, ThrottlePlan

from .test_operator_rebalance import Cluster
from .test_operator_rebalance_handler import Api

TP = tuple[str, int]
ON_2 = {("t", p): (2, p % 2) for p in range(5)}  # every partition has a replica on broker 2
PLAN = {tp: (1 if r[1] == 0 else 0, r[1]) for tp, r in ON_2.items()}


# ------------------------------------------------------------------------------ decide
def decide(**changes: Any) -> drain.Decision:
    args: dict[str, Any] = {"in_flight": {}, "ongoing": set(), "assignment": ON_2,
                            "plan": PLAN, "started": False, "other_running": None,
                            "batch_size": 2}
    return drain.decide(**{**args, **changes})


def test_a_first_batch_of_batch_size_partitions() -> None:
    step = decide()
    assert step.action == "send" and not step.finished
    assert step.batch == {("t", 0): PLAN[("t", 0)], ("t", 1): PLAN[("t", 1)]}


def test_a_batch_in_flight_is_waited_for_and_sent_again_if_dropped() -> None:
    flight = {("t", 0): PLAN[("t", 0)]}
    assert decide(in_flight=flight, ongoing={("t", 0)}) == drain.Decision("wait", moving=1)
    assert decide(in_flight=flight) == drain.Decision("resend", moving=1)  # nothing ongoing
    moved = {**ON_2, ("t", 0): PLAN[("t", 0)]}
    rest = {tp: r for tp, r in PLAN.items() if tp != ("t", 0)}
    step = decide(in_flight=flight, assignment=moved, plan=rest)
    assert step.action == "send" and step.finished and ("t", 0) not in step.batch
    gone = {tp: r for tp, r in ON_2.items() if tp != ("t", 0)}  # its topic deleted meanwhile
    assert decide(in_flight=flight, assignment=gone, plan=rest).finished


def test_nothing_left_to_move_is_done() -> None:
    assert decide(plan={}) == drain.Decision("done")
    assert decide(plan={}, in_flight={("t", 0): (1, 0)},
                  assignment={("t", 0): (1, 0)}) == drain.Decision("done", finished=True)


def test_a_drain_not_started_waits_for_a_running_rebalance_one_started_does_not() -> None:
    assert decide(other_running="r").action == "held"
    assert decide(other_running="r", started=True).action == "send"
    done = {("t", 0): PLAN[("t", 0)]}
    assert decide(other_running="r", in_flight=done,
                  assignment={**ON_2, **done}).action == "send"  # its first batch just ended


# ------------------------------------------------------------------------------ passes
def drain_pass(api: Api, cluster: Cluster, previous: dict[str, Any] | None,
               rate: int = 1000, current: int = 3, desired: int = 2) -> drain.Outcome:
    body = api.objects[("Broker", "events")]
    return drain.run_pass(api, body, lambda: cluster,  # type: ignore[arg-type,return-value]
                          current, desired, previous, rate=rate, batch_size=2)


def test_each_batch_is_throttled_and_cleared_once_done_even_after_a_restart() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    first = drain_pass(api, cluster, None)
    assert first.moving and first.scale.replicas == 3 and first.reason == "ScaleDownBlocked"
    assert "are being reassigned" in first.scale.blocked and "batch 1" in first.scale.blocked
    assert first.status is not None and len(first.status["inFlight"]) == 2
    (plan,) = cluster.throttles
    assert cluster.throttle_log == [("set", plan)] and len(cluster.sent) == 1  # set, then sent
    assert ThrottlePlan.from_status(first.status["throttle"]) == plan
    assert plan.rate == 1000 and 2 in plan.brokers
    assert plan.topics["t"][LEADER_REPLICAS] == "0:0,0:2,1:1,1:2"
    held = drain_pass(api, cluster, first.status)  # still moving: nothing new, throttles stay
    assert held.status == first.status and cluster.throttles == [plan]
    assert len(cluster.sent) == 1 and "still moving" in held.scale.blocked
    cluster.finish()
    # A restarted operator knows only the status: it clears the finished batch's throttles,
    # then throttles and sends the next batch.
    status: dict[str, Any] | None = dict(first.status)
    outcome = drain_pass(api, cluster, status)
    assert cluster.throttle_log[1] == ("clear", plan) and cluster.throttle_log[2][0] == "set"
    batches = 1
    while outcome.status is not None:
        assert len(cluster.throttles) == 1 and outcome.status["throttle"]
        batches += 1
        cluster.finish()
        outcome = drain_pass(api, cluster, outcome.status)
    assert batches == 3 and outcome.scale.replicas == 2 and not outcome.scale.blocked
    assert cluster.throttles == [] and not outcome.moving
    assert not any(2 in r for r in cluster.assignment_now.values())
    sets = [p for kind, p in cluster.throttle_log if kind == "set"]
    assert len(sets) == 3 and all(("clear", p) in cluster.throttle_log for p in sets)
    assert [e["reason"] for e in api.events] == ["ReassigningPartitions"] * 3


def test_without_a_throttle_nothing_is_set() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    outcome = drain_pass(api, cluster, None, rate=0)
    assert outcome.status is not None and "throttle" not in outcome.status
    assert not cluster.throttle_log and cluster.sent


class Refusing(Cluster):
    def __init__(self, served: bool) -> None:
        super().__init__([0, 1, 2], ON_2)
        self.served = served

    def reassign(self, plan: Any) -> bool:
        if self.served:
            raise KafkaOperationError("AlterPartitionReassignments refused t-0: "
                                      "INVALID_REPLICA_ASSIGNMENT")
        return False


@pytest.mark.parametrize("served", [True, False])
def test_a_refused_batch_leaves_no_throttle(served: bool) -> None:
    api, cluster = Api(), Refusing(served)
    outcome = drain_pass(api, cluster, None)
    assert outcome.status is None and cluster.throttles == []
    assert [kind for kind, _ in cluster.throttle_log] == ["set", "clear"]
    if served:
        assert "INVALID_REPLICA_ASSIGNMENT" in outcome.scale.blocked
    else:
        assert "must be reassigned" in outcome.scale.blocked and not outcome.moving
    assert outcome.scale.replicas == 3 and not api.events


def test_a_half_set_throttle_is_cleared() -> None:
    class Failing(Cluster):
        def set_throttle(self, plan: ThrottlePlan) -> None:
            super().set_throttle(plan)  # the topic configs went, a broker refused its rate
            raise KafkaOperationError("IncrementalAlterConfigs broker 2: timed out")

    api, cluster = Api(), Failing([0, 1, 2], ON_2)
    outcome = drain_pass(api, cluster, None)
    assert cluster.throttles == [] and not cluster.sent and outcome.status is None
    assert "timed out" in outcome.scale.blocked


def running(api: Api, name: str = "r", state: str = "Rebalancing") -> None:
    api.add(name, approved=True)
    api.objects[("Rebalance", name)]["status"] = {"state": state}


def test_the_drain_waits_for_a_running_rebalance_then_goes_on() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    running(api)
    held = drain_pass(api, cluster, None)
    assert held.reason == "AnotherRebalanceRunning" and not held.moving
    assert "Rebalance r is rebalancing this Broker" in held.scale.blocked
    assert held.status is None and not cluster.sent and not cluster.throttle_log
    api.objects[("Rebalance", "r")]["status"]["state"] = "Ready"
    assert drain_pass(api, cluster, None).moving and len(cluster.sent) == 1


def test_a_started_drain_is_not_held_by_a_rebalance() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    first = drain_pass(api, cluster, None)
    running(api)
    cluster.finish()
    second = drain_pass(api, cluster, first.status)
    assert second.reason == "ScaleDownBlocked" and len(cluster.sent) == 2


def test_a_called_off_scale_down_still_clears_its_batch() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    first = drain_pass(api, cluster, None)
    back = drain_pass(api, cluster, first.status, desired=3)  # replicas set back to 3
    assert back.status == first.status and back.scale.replicas == 3 and not back.scale.blocked
    cluster.finish()
    done = drain_pass(api, cluster, first.status, desired=3)
    assert done.status is None and cluster.throttles == [] and len(cluster.sent) == 1


def test_the_broker_conditions_of_a_drain() -> None:
    from strata.operator.volumes import ResizePlan

    def by_type(outcome: drain.Outcome) -> dict[str, tuple[str, str]]:
        items = broker.broker_conditions(
            False, outcome.reason, outcome.scale.blocked, outcome.scale, ResizePlan(),
            BrokerSpec(replicas=2), 3, 1, (), moving=outcome.moving,
            blocked_reason=outcome.reason)
        return {c["type"]: (c["status"], c["reason"]) for c in items}

    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    running(api)
    held = by_type(drain_pass(api, cluster, None))
    assert held["ScaleDownBlocked"] == ("True", "AnotherRebalanceRunning")
    assert held["Rebalancing"] == ("False", "NoReassignment")  # the Rebalance is not held back
    api.objects[("Rebalance", "r")]["status"]["state"] = "Ready"
    moving = by_type(drain_pass(api, cluster, None))
    assert moving["ScaleDownBlocked"] == ("True", "ScaleDownBlocked")
    assert moving["Rebalancing"] == ("True", "ReassigningPartitions")


def test_a_rebalance_sees_a_running_drain_even_once_started() -> None:
    api = Api()
    api.add("r", approved=True)
    body = api.objects[("Rebalance", "r")]
    broker_obj = api.objects[("Broker", "events")]
    drain_condition = {"type": "Rebalancing", "status": "True",
                       "reason": conditions.REASSIGNING}
    # A Broker run Pending (it waits for the drain and for a started Rebalance) does not let a
    # started Rebalance past a drain that is moving partitions.
    broker_obj["status"] = {"rebalance": {"state": "Pending"}, "conditions": [drain_condition]}
    assert rebalance_handler.other_running(api, body, broker_obj,  # type: ignore[arg-type]
                                           started=True) == (
        "Broker events (ReassigningPartitions)")
    own = {**drain_condition, "reason": "Rebalancing"}
    broker_obj["status"] = {"rebalance": {"state": "Pending"}, "conditions": [own]}
    assert rebalance_handler.other_running(api, body, broker_obj,  # type: ignore[arg-type]
                                           started=True) is None


def test_an_unreachable_cluster_keeps_the_batch_and_its_throttles() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    first = drain_pass(api, cluster, None)

    def unreachable() -> Any:
        raise KafkaOperationError("Metadata from 127.0.0.1:9092: timed out")

    body = api.objects[("Broker", "events")]
    outcome = drain.run_pass(api, body, unreachable, 3, 2,  # type: ignore[arg-type]
                             first.status, rate=1000, batch_size=2)
    assert outcome.status == first.status and outcome.moving
    assert "cannot read the replica assignment" in outcome.scale.blocked
    assert outcome.scale.replicas == 3 and cluster.throttles


def pruned(schema: dict[str, Any], value: Any) -> Any:
    """``value`` as the API server stores it under a structural ``schema``: undeclared fields
    dropped (kept under ``x-kubernetes-preserve-unknown-fields``)."""
    if isinstance(value, dict) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        props = schema.get("properties") or {}
        return {k: pruned(props[k], v) for k, v in value.items() if k in props}
    if isinstance(value, list):
        return [pruned(schema.get("items") or {}, v) for v in value]
    return value


def test_the_broker_crd_keeps_the_drain_status() -> None:
    import jsonschema

    from strata.operator import crds

    from .test_operator_crds import json_schema, schema_of

    api, cluster = Api(), Cluster([0, 1, 2], ON_2)
    outcome = drain_pass(api, cluster, None)
    assert outcome.status is not None and outcome.status["throttle"]
    status_schema = schema_of(crds.BROKER_CRD)["properties"]["status"]
    status = {"scaleDown": outcome.status}
    jsonschema.validate(status, json_schema(status_schema))
    assert pruned(status_schema, status) == status  # nothing of it silently dropped
