"""Self-balancing of a Broker's cluster, one step per reconcile pass: the state machine around
the planner (``balance.py``), kept in the Broker's ``status.rebalance``.

Triggers (``trigger``, pure): a scale-up (``ScaleUp``: the new brokers are waited for), the
Broker annotation ``strata.dev/rebalance: "true"`` (``Requested``; removed by the operator
once done) and a finished scale-down (``ScaleDown``: the remaining brokers are rebalanced and
the preferred leaders elected, so leadership is not left skewed after a drain).

States of ``status.rebalance.state``:

* ``Pending``: triggered; nothing sent yet (a ScaleUp waits here until every broker up to
  ``replicas - 1`` is registered; any rebalance waits while a scale-down is moving
  partitions);
* ``Moving``: one batch of AlterPartitionReassignments sent (``inFlight``); each pass asks
  ListPartitionReassignments and Metadata, and only when the controller has nothing in
  progress and every partition of the batch has its new replica list does the next batch go
  (a batch the controller dropped is sent again: the same targets, idempotent). The plan is
  recomputed from the live assignment before each batch (deterministic, so the remaining
  moves are what is left of the first plan), ``batchesDone``/``batchesTotal`` count them;
* ``Done``: no move left; a preferred-leader election (ElectLeaders) was run for every
  partition whose leader is not its first replica; the message gives the final spread.

Throttling (``throttle.py``, KIP-73): before a batch is sent, its throttles are set (the
moving partitions' ``*.replication.throttled.replicas`` topic configs and the
``*.replication.throttled.rate`` of every broker involved, at ``throttle`` bytes/s: the
operator's ``STRATA_OPERATOR_REBALANCE_THROTTLE``) and recorded in ``status.rebalance.throttle``;
once the batch is done they are removed, before the next batch is planned. Kept in the status,
they are removed by an operator restarted mid-batch too.

One rebalance per Broker: a ``Pending`` run waits while a ``Rebalance`` resource of this
Broker is moving partitions (state ``Rebalancing``; ``rebalance_handler.py`` in turn waits
for this one unless it had already started).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from strata.operator import balance, conditions, events
from strata.operator.kafka import Cluster, KafkaOperationError
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerSpec
from strata.operator.settings import SETTINGS
from strata.operator.throttle import ThrottlePlan, plan_throttles

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

ANNOTATION: Final = "strata.dev/rebalance"
PENDING: Final = "Pending"
MOVING: Final = "Moving"
DONE: Final = "Done"
SCALE_UP: Final = "ScaleUp"
SCALE_DOWN: Final = "ScaleDown"
REQUESTED: Final = "Requested"


def active(rebalance: Mapping[str, Any] | None) -> bool:
    return (rebalance or {}).get("state") in (PENDING, MOVING)


def trigger(previous: Mapping[str, Any] | None, annotations: Mapping[str, str],
            live_replicas: int, desired: int, shrunk: bool) -> dict[str, Any] | None:
    """A new ``status.rebalance`` if something starts one now, else None. ``live_replicas``:
    the StatefulSet's size before this pass (0: it did not exist); ``shrunk``: this pass
    shrank it after a scale-down."""
    if active(previous):
        return None
    reason = None
    if 0 < live_replicas < desired:
        reason = SCALE_UP
    elif str(annotations.get(ANNOTATION, "")).lower() == "true":
        reason = REQUESTED
    elif shrunk:
        reason = SCALE_DOWN
    if reason is None:
        return None
    return {"state": PENDING, "reason": reason, "batchesDone": 0, "batchesTotal": 0,
            "message": "waiting to start"}


@dataclass(frozen=True, slots=True)
class Step:
    """What one pass did: the new ``status.rebalance`` and an Event message (None: nothing
    worth one)."""

    status: dict[str, Any]
    event: str | None = None


def _in_flight(status: Mapping[str, Any]) -> dict[TopicPartition, tuple[int, ...]]:
    return {(str(e["topic"]), int(e["partition"])): tuple(int(r) for r in e["replicas"])
            for e in status.get("inFlight") or ()}


def advance(cluster: Cluster, status: Mapping[str, Any], replicas: int, batch_size: int,
            scaling_down: bool, throttle: int = 0) -> Step:
    """One step of an active rebalance (see the module docstring). Raises
    ``KafkaOperationError`` when the cluster cannot be asked (the caller keeps the status
    and retries at the next pass)."""
    current = dict(status)

    def wait(message: str) -> Step:
        return Step({**current, "message": message})

    if scaling_down:
        return wait("waiting for the scale-down to move its partitions first")
    registered = cluster.racks()
    wanted = range(replicas)
    missing = [b for b in wanted if b not in registered]
    if missing and current.get("reason") == SCALE_UP:
        return wait(f"waiting for brokers {missing} to register")
    racks = {b: registered[b] for b in wanted if b in registered}
    ongoing = cluster.ongoing_reassignments()
    assignment = cluster.assignment()
    flight = _in_flight(current)
    if ongoing or any(assignment.get(tp) != target for tp, target in flight.items()):
        if not ongoing and flight:  # dropped by the controller: the same targets again
            cluster.reassign(flight)
        return wait(f"batch {current.get('batchesDone', 0)} of "
                    f"{current.get('batchesTotal', 0)}: "
                    f"{len(ongoing) or len(flight)} partitions still moving")
    if current.get("throttle"):  # the batch is done: its throttles go
        cluster.clear_throttle(ThrottlePlan.from_status(current["throttle"]))
        current.pop("throttle")
    plan = balance.plan_balance(racks, assignment)
    if not plan.empty:
        chunks = balance.batches(plan.reassignments, batch_size)
        throttles = send_throttled_batch(cluster, assignment, chunks[0], throttle)
        if not throttles.empty:
            current["throttle"] = throttles.to_status()
        done = int(current.get("batchesDone", 0)) + 1
        total = done + len(chunks) - 1
        message = (f"batch {done} of {total}: moving {len(chunks[0])} partitions "
                   f"({plan.replica_moves} replica moves left in the plan)")
        return Step({**current, "state": MOVING, "batchesDone": done, "batchesTotal": total,
                     "message": message,
                     "inFlight": [{"topic": t, "partition": p, "replicas": list(r)}
                                  for (t, p), r in sorted(chunks[0].items())]}, message)
    leaders = cluster.leaders()
    elect = sorted(tp for tp, replicas in assignment.items()
                   if replicas and tp in leaders and leaders[tp] != replicas[0]
                   and all(b in racks for b in replicas))
    cluster.elect_preferred_leaders(elect)
    replica_spread, leader_spread = balance.spread(sorted(racks), assignment)
    message = (f"balanced over brokers {sorted(racks)}: replicas within {replica_spread}, "
               f"preferred leaders within {leader_spread} of even; {len(elect)} preferred "
               f"leaders elected after {current.get('batchesDone', 0)} batches")
    done_status = {k: v for k, v in current.items() if k != "inFlight"}
    return Step({**done_status, "state": DONE, "message": message}, message)


def running_resource(kube: Kube, body: Mapping[str, Any]) -> str | None:
    """The name of a ``Rebalance`` of this Broker that is moving partitions, or None."""
    metadata = body.get("metadata") or {}
    for item in kube.list("Rebalance", metadata.get("namespace")):
        if ((item.get("spec") or {}).get("brokerRef") == metadata.get("name")
                and (item.get("status") or {}).get("state") == "Rebalancing"):
            return str(item["metadata"]["name"])
    return None


def run_pass(kube: Kube, body: Mapping[str, Any], spec: BrokerSpec,
             get_cluster: Callable[[], Cluster], previous: Mapping[str, Any] | None,
             live_replicas: int, replicas: int, shrunk: bool) -> Obj | None:
    """The Broker reconcile's step: start (``trigger``) or advance one step of a rebalance,
    post its Events, drop the annotation once done; the new ``status.rebalance`` (None:
    there never was one). ``replicas``: the StatefulSet's size after this pass."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    state = trigger(previous, annotations, live_replicas, spec.replicas, shrunk)
    if state is not None:
        events.record(kube, body, events.NORMAL, conditions.REBALANCE_STARTED,
                      f"rebalance started ({state['reason']})")
    state = state or (dict(previous) if previous else None)
    if state is None or not active(state):
        return state
    if state["state"] == PENDING:  # one rebalance per Broker: a running Rebalance goes first
        running = running_resource(kube, body)
        if running is not None:
            return {**state, "message": f"waiting for Rebalance {running} to finish"}
    try:
        step = advance(get_cluster(), state, spec.replicas, SETTINGS.rebalance_batch_size,
                       scaling_down=replicas > spec.replicas,
                       throttle=SETTINGS.rebalance_throttle)
    except KafkaOperationError as exc:
        return {**state, "message": f"cannot go on: {exc}"}
    if step.event:
        events.record(kube, body, events.NORMAL, conditions.REBALANCING_REASON
                      if step.status["state"] != DONE else
                      conditions.REBALANCE_COMPLETE, step.event)
    if step.status["state"] == DONE and ANNOTATION in annotations:
        kube.patch("Broker", body["metadata"]["namespace"], body["metadata"]["name"],
                   {"metadata": {"annotations": {ANNOTATION: None}}})
    # The status is written as a merge patch: a key dropped this step is deleted with null.
    return {**step.status, **{key: None for key in ("inFlight", "throttle")
                              if state.get(key) and key not in step.status}}


def condition(state: Mapping[str, Any], generation: int | None,
              previous: Sequence[Mapping[str, Any]]) -> Obj:
    """The Broker's ``Rebalancing`` condition from ``status.rebalance``."""
    moving = active(state)
    return conditions.condition(
        conditions.REBALANCING, moving,
        conditions.REBALANCING_REASON if moving else conditions.REBALANCE_COMPLETE,
        f"{state.get('reason')}: {state.get('message', '')}", generation, previous)


def send_throttled_batch(cluster: Cluster,
                         assignment: Mapping[balance.TopicPartition, tuple[int, ...]],
                         batch: Mapping[balance.TopicPartition, tuple[int, ...]], rate: int
                         ) -> ThrottlePlan:
    """Throttle ``batch``'s moves at ``rate`` bytes/s (``plan_throttles``; 0 = none), then
    send it to the controller; the throttles set. Used by every batch the operator sends: a
    rebalance's, a ``Rebalance``'s and a scale-down's drain (``drain.py``).
    ``KafkaOperationError`` when a throttle cannot be set or the controller refuses or cannot
    be asked (code ``ReassignmentNotServed`` when it does not serve the API): nothing moves,
    so what was set is cleared again."""
    throttles = plan_throttles(assignment, batch, rate)
    try:
        if not throttles.empty:
            cluster.set_throttle(throttles)
        if not cluster.reassign(batch):
            raise KafkaOperationError("the controller does not serve "
                                      "AlterPartitionReassignments",
                                      conditions.REASSIGNMENT_NOT_SERVED)
    except KafkaOperationError:
        if not throttles.empty:
            try:
                cluster.clear_throttle(throttles)
            except KafkaOperationError as exc:  # the first error is the one to report
                logger.warning("throttles of a refused batch not cleared: %s", exc)
        raise
    return throttles
