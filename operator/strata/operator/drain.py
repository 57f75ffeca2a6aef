"""A scale-down's drain: the replicas on the leaving brokers moved off in throttled batches, one
batch in flight at a time, kept in the Broker's ``status.scaleDown``.

``rolling.decide_scale`` says what must move (every partition with a replica on a leaving
broker, ``plan_reassignment``); this module sends it the way a rebalance sends its batches
(``rebalance.send_throttled_batch``): at most ``STRATA_OPERATOR_REBALANCE_BATCH_SIZE``
partitions per AlterPartitionReassignments, each batch throttled (``throttle.plan_throttles``
at ``STRATA_OPERATOR_REBALANCE_THROTTLE``; 0 = none) before it is sent and unthrottled again
if it is refused. ``status.scaleDown``: ``{batchesDone, inFlight, throttle}``.

One step per pass (``decide``, pure):

* a batch in flight that the controller still moves (ListPartitionReassignments, or a
  partition whose replicas differ from its target in Metadata): wait; one the controller
  dropped (nothing ongoing, targets not reached) is sent again, the same targets;
* a batch found done: its throttles are cleared first (so an operator restarted mid-batch
  clears them too: they are in the status), then the next batch is planned from the live
  assignment; nothing left: ``status.scaleDown`` is removed and the StatefulSet shrinks;
* a drain that has not sent its first batch waits while a ``Rebalance`` of the same Broker is
  ``Rebalancing`` (``AnotherRebalanceRunning``) and starts once that is over. Once started it
  goes on: the Broker's ``Rebalancing`` condition is True meanwhile, which is what a
  ``Rebalance`` checks before it starts — the one that started first wins. Passes over a
  Broker and over its Rebalances share one lock (``broker.lock``), so both never decide at
  the same time.

A partition absent from the assignment (its topic deleted meanwhile) counts as moved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from strata.operator import balance, conditions, events, rebalance, rolling
from strata.operator.kafka import Cluster, KafkaOperationError
from strata.operator.kube import Kube
from strata.operator.throttle import ThrottlePlan

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Targets = Mapping[TopicPartition, tuple[int, ...]]

ANOTHER_REBALANCE_RUNNING: Final = "AnotherRebalanceRunning"
WAIT: Final = "wait"
RESEND: Final = "resend"
SEND: Final = "send"
HELD: Final = "held"
DONE: Final = "done"


@dataclass(frozen=True, slots=True)
class Decision:
    """``action``: wait, resend (the batch in flight), send (``batch``), held (another
    rebalance runs), done (nothing to move); ``finished``: the batch in flight is done, its
    throttles go first; ``moving``: partitions of the batch in flight still moving."""

    action: str
    finished: bool = False
    batch: Targets = field(default_factory=dict)
    moving: int = 0


def targets(entries: Any) -> dict[TopicPartition, tuple[int, ...]]:
    """``inFlight`` entries of a status back as targets."""
    return {(str(e["topic"]), int(e["partition"])): tuple(int(r) for r in e["replicas"])
            for e in entries or ()}


def entries(batch: Targets) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "replicas": list(r)}
            for (t, p), r in sorted(batch.items())]


def decide(*, in_flight: Targets, ongoing: set[TopicPartition],
           assignment: Mapping[TopicPartition, tuple[int, ...]], plan: Targets,
           started: bool, other_running: str | None, batch_size: int) -> Decision:
    """The drain's next step (see the module docstring). ``plan``: what still has to move
    (``decide_scale``'s reassignments, from ``assignment``); ``started``: the drain sent a
    batch before; ``other_running``: a Rebalance of the Broker in state Rebalancing."""
    if in_flight:
        moving = [tp for tp, target in in_flight.items()
                  if tp in assignment and assignment[tp] != target]
        if ongoing or moving:
            return Decision(WAIT if ongoing else RESEND, moving=len(ongoing) or len(moving))
    finished = bool(in_flight)
    if not plan:
        return Decision(DONE, finished)
    if other_running is not None and not (started or finished):
        return Decision(HELD, finished)
    return Decision(SEND, finished, balance.batches(plan, batch_size)[0])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a pass did: the StatefulSet decision (``scale.blocked`` says why it waits), the
    new ``status.scaleDown`` (None: none; written as null), whether partitions are moving
    (the Broker's ``Rebalancing`` condition) and the reason of ``ScaleDownBlocked``."""

    scale: rolling.ScaleDecision
    status: dict[str, Any] | None
    moving: bool = False
    reason: str = conditions.SCALE_DOWN_BLOCKED


def run_pass(kube: Kube, body: Mapping[str, Any], get_cluster: Callable[[], Cluster],
             current: int, desired: int, previous: Mapping[str, Any] | None, *,
             rate: int, batch_size: int) -> Outcome:
    """One step of the drain of brokers ``desired..current-1`` (also run, with nothing to
    move, to finish the bookkeeping of a batch sent before the scale-down was called off)."""
    state: dict[str, Any] = dict(previous or {})
    kept = state or None
    try:
        cluster = get_cluster()
        assignment = cluster.assignment()
    except KafkaOperationError:  # a batch sent before may still be moving
        return Outcome(rolling.decide_scale(current, desired, None), kept,
                       moving=bool(state.get("inFlight")))
    scale = rolling.decide_scale(current, desired, assignment)
    flight = targets(state.get("inFlight"))
    done = int(state.get("batchesDone", 0))
    leaving = list(range(desired, current))
    try:
        ongoing = cluster.ongoing_reassignments() if flight else set()
        other = (rebalance.running_resource(kube, body)
                 if scale.reassignments and not (done or flight) else None)
        decision = decide(in_flight=flight, ongoing=ongoing, assignment=assignment,
                          plan=scale.reassignments, started=bool(done or flight),
                          other_running=other, batch_size=batch_size)
        if decision.action in (WAIT, RESEND):
            if decision.action == RESEND:  # dropped by the controller: the same targets again
                cluster.reassign(flight)
            return Outcome(_waiting(scale, f"batch {done + 1} of the drain: {decision.moving} "
                                           "partitions still moving"), kept, moving=True)
        if decision.finished:  # the batch is done: its throttles go before the next one
            if state.get("throttle"):
                cluster.clear_throttle(ThrottlePlan.from_status(state["throttle"]))
            state = {"batchesDone": done + 1}
            done += 1
            kept = state
        if decision.action == DONE:
            return Outcome(scale, None)
        if decision.action == HELD:
            return Outcome(rolling.ScaleDecision(
                current, scale.reassignments,
                f"scale-down waits: Rebalance {other} is rebalancing this Broker; "
                f"{len(scale.reassignments)} partitions move off brokers {leaving} once it "
                "is over"), kept, reason=ANOTHER_REBALANCE_RUNNING)
        throttles = rebalance.send_throttled_batch(cluster, assignment, decision.batch, rate)
    except KafkaOperationError as exc:
        if exc.code == conditions.REASSIGNMENT_NOT_SERVED:
            return Outcome(rolling.ScaleDecision(
                scale.replicas, scale.reassignments,
                scale.blocked.replace("are being reassigned", "must be reassigned")
                + " (the controller does not serve AlterPartitionReassignments: move them "
                "with your tools, then the StatefulSet shrinks)"), kept)
        return Outcome(rolling.ScaleDecision(scale.replicas, scale.reassignments,
                                             f"{scale.blocked} ({exc})"), kept,
                       moving=bool(flight))
    state = {"batchesDone": done, "inFlight": entries(decision.batch)}
    if not throttles.empty:
        state["throttle"] = throttles.to_status()
    message = (f"batch {done + 1}: moving {len(decision.batch)} of {len(scale.reassignments)} "
               f"partitions off brokers {leaving} before scaling down"
               + (f" (throttled at {rate} bytes/s)" if not throttles.empty else ""))
    events.record(kube, body, events.NORMAL, conditions.REASSIGNING, message)
    return Outcome(_waiting(scale, message), state, moving=True)


def _waiting(scale: rolling.ScaleDecision, why: str) -> rolling.ScaleDecision:
    return rolling.ScaleDecision(scale.replicas, scale.reassignments,
                                 f"{scale.blocked}: {why}" if scale.blocked else "")
