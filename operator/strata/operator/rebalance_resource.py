"""The ``Rebalance`` custom resource's pure parts: spec reading, the proposal, the next step.

A ``Rebalance`` (modelled on Strimzi's KafkaRebalance) names a Broker (``brokerRef``), a
``mode`` (``full``: even the cluster out with ``balance.plan_balance``; ``remove-brokers``: move
every replica off ``brokers``, then even out the rest) and an optional ``throttle`` (bytes/s for
this run; 0 = none; absent = the operator default). No I/O here: the kopf handler reads the
cluster, calls these functions and writes what they return.

Invariants:
- a ``remove-brokers`` proposal leaves no replica on a named broker; when the remaining brokers
  cannot hold a partition's replication factor it is refused (``ProposalError``), never cut short;
- ``next_step`` is the one state machine: no proposal -> propose; a proposal is executed only
  when approved (annotation ``strata.dev/rebalance-approve: "true"``), one batch at a time,
  and only while no other rebalance of the same Broker runs; a deleted Rebalance stops after
  the current batch.

``build_status`` (pure) turns the handler's outcome into the status: ``state`` (Strimzi's
KafkaRebalance states), the three conditions ``ProposalReady`` / ``Rebalancing`` / ``Ready``
(each with ``observedGeneration``), ``progress`` with a ``done/total`` summary for the printer
column; ``plan_status`` / ``plan_from_status`` keep the approved batches in ``status.plan`` so
that what runs is what was approved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.operator import conditions
from strata.operator.balance import Assignment, TopicPartition, batches, plan_balance
from strata.operator.rolling import plan_reassignment

APPROVE_ANNOTATION = "strata.dev/rebalance-approve"
MODES = ("full", "remove-brokers")

# status.state (Strimzi's KafkaRebalance states, those we use)
PENDING_PROPOSAL = "PendingProposal"
PROPOSAL_READY = "ProposalReady"
REBALANCING = "Rebalancing"
READY = "Ready"
NOT_READY = "NotReady"
STOPPED = "Stopped"
STATES = (PENDING_PROPOSAL, PROPOSAL_READY, REBALANCING, READY, NOT_READY, STOPPED)
PROPOSAL_READY_TYPE = "ProposalReady"  # condition types
REBALANCING_TYPE = conditions.REBALANCING


class ProposalError(ValueError):
    """The spec is invalid or the cluster cannot be rebalanced as asked (the message says why)."""


@dataclass(frozen=True, slots=True)
class RebalanceSpec:
    broker_ref: str
    mode: str
    brokers: tuple[int, ...]
    throttle: int | None  # bytes/s; None = the operator default; 0 = none


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the run will do: new replica lists, cut into batches."""

    batches: tuple[dict[TopicPartition, tuple[int, ...]], ...]
    replica_moves: int
    leader_changes: int

    def status(self) -> dict[str, Any]:
        return {"moves": self.replica_moves, "leaderChanges": self.leader_changes,
                "batches": len(self.batches),
                "partitions": sum(len(b) for b in self.batches)}


def read_spec(spec: Mapping[str, Any]) -> RebalanceSpec:
    """The spec, validated (``ProposalError`` naming the field on bad input)."""
    ref = spec.get("brokerRef")
    if not isinstance(ref, str) or not ref:
        raise ProposalError("spec.brokerRef must name a Broker")
    mode = spec.get("mode", "full")
    if mode not in MODES:
        raise ProposalError(f"spec.mode must be one of {', '.join(MODES)}, got {mode!r}")
    raw = spec.get("brokers") or []
    if not isinstance(raw, list) or not all(isinstance(b, int) and b >= 0 for b in raw):
        raise ProposalError("spec.brokers must be a list of broker ids")
    if mode == "remove-brokers" and not raw:
        raise ProposalError("spec.brokers must name at least one broker for remove-brokers")
    throttle = spec.get("throttle")
    if throttle is not None and (not isinstance(throttle, int) or throttle < 0):
        raise ProposalError("spec.throttle must be bytes/s >= 0")
    return RebalanceSpec(ref, mode, tuple(sorted(set(raw))), throttle)


def propose(spec: RebalanceSpec, racks: Mapping[int, str | None], assignment: Assignment,
            batch_size: int) -> Proposal:
    """The proposal for ``spec`` over the live brokers ``racks`` and the current assignment."""
    if spec.mode == "full":
        plan = plan_balance(racks, assignment)
        return Proposal(tuple(batches(plan.reassignments, batch_size)), plan.replica_moves,
                        plan.leader_changes)
    unknown = [b for b in spec.brokers if b not in racks]
    if unknown:
        raise ProposalError(f"brokers {unknown} are not in the cluster")
    leaving = set(spec.brokers)
    remaining = [b for b in sorted(racks) if b not in leaving]
    try:
        moved = plan_reassignment(assignment, leaving, remaining)
    except ValueError as exc:
        raise ProposalError(f"cannot remove brokers {sorted(leaving)}: {exc}") from exc
    after = {tp: moved.get(tp, tuple(replicas)) for tp, replicas in assignment.items()}
    even = plan_balance({b: racks[b] for b in remaining}, after)
    final = {tp: even.reassignments.get(tp, after[tp]) for tp in after}
    changed = {tp: tuple(r) for tp, r in final.items() if tuple(r) != tuple(assignment[tp])}
    moves = sum(len(set(r) - set(assignment[tp])) for tp, r in changed.items())
    leaders = sum(1 for tp, r in changed.items() if r[0] != assignment[tp][0])
    return Proposal(tuple(batches(changed, batch_size)), moves, leaders)


def approved(annotations: Mapping[str, str]) -> bool:
    return annotations.get(APPROVE_ANNOTATION, "").lower() == "true"


@dataclass(frozen=True, slots=True)
class Step:
    """What the handler does next: ``action`` is one of propose, wait-approval, blocked,
    run-batch, elect-leaders, done, stop; ``reason``/``message`` go into the condition."""

    action: str
    reason: str
    message: str


def next_step(*, broker_exists: bool, has_proposal: bool, is_approved: bool,
              other_running: str | None, batches_done: int, batches_total: int,
              leaders_elected: bool, deleting: bool) -> Step:
    """The state decision (see the module docstring). ``other_running``: the name of another
    rebalance of the same Broker in progress (a Rebalance or the Broker's own), or None."""
    if deleting:
        return Step("stop", "Deleted", "stopping after the current batch; throttles cleared")
    if not broker_exists:
        return Step("blocked", "BrokerNotFound",
                    "the Broker named in spec.brokerRef does not exist")
    if not has_proposal:
        return Step("propose", "ProposalPending", "computing the proposal")
    if not is_approved:
        return Step("wait-approval", "WaitingForApproval",
                    f'annotate {APPROVE_ANNOTATION}="true" to execute the proposal')
    if batches_done < batches_total:
        if other_running is not None:
            return Step("blocked", "AnotherRebalanceRunning",
                        f"{other_running} is rebalancing this Broker; waiting")
        return Step("run-batch", "Rebalancing", f"batch {batches_done + 1}/{batches_total}")
    if not leaders_elected:
        return Step("elect-leaders", "Rebalancing", "electing preferred leaders")
    return Step("done", "Ready", f"{batches_total} batches done")


def plan_status(proposal: Proposal) -> list[dict[str, Any]]:
    """The proposal's batches as ``status.plan`` entries (batch index, topic, partition,
    target replicas)."""
    return [{"batch": i, "topic": t, "partition": p, "replicas": list(r)}
            for i, batch in enumerate(proposal.batches) for (t, p), r in sorted(batch.items())]


def plan_from_status(plan: Any) -> list[dict[TopicPartition, tuple[int, ...]]]:
    """``status.plan`` back as batches, in order."""
    out: dict[int, dict[TopicPartition, tuple[int, ...]]] = {}
    for entry in plan or ():
        out.setdefault(int(entry["batch"]), {})[(str(entry["topic"]), int(entry["partition"]))] = (
            tuple(int(r) for r in entry["replicas"]))
    return [out[i] for i in sorted(out)]


def progress(done: int, total: int, leaders_elected: bool) -> dict[str, Any]:
    return {"batchesDone": done, "batchesTotal": total, "summary": f"{done}/{total}",
            "leadersElected": leaders_elected}


def state_of(action: str) -> str:
    """``status.state`` for a ``Step.action``."""
    return {"propose": PENDING_PROPOSAL, "wait-approval": PROPOSAL_READY,
            "blocked": NOT_READY, "run-batch": REBALANCING, "elect-leaders": REBALANCING,
            "done": READY, "stop": STOPPED}.get(action, NOT_READY)


def build_status(*, state: str, reason: str, message: str, has_proposal: bool,
                 proposal_message: str, generation: int | None,
                 previous: Any = (), now: str | None = None,
                 **fields: Any) -> dict[str, Any]:
    """The status to patch: ``state``, the three conditions, ``observedGeneration`` and
    ``fields`` (proposal, plan, progress, inFlight, throttle; None deletes in a merge patch).
    ``reason``/``message``: why the run is where it is (the Step's)."""
    running = state == REBALANCING
    ready = state == READY
    return {
        **fields,
        "state": state,
        "observedGeneration": generation,
        "conditions": [
            conditions.condition(PROPOSAL_READY_TYPE, has_proposal,
                                 PROPOSAL_READY if has_proposal else reason,
                                 proposal_message if has_proposal else message,
                                 generation, previous, now),
            conditions.condition(REBALANCING_TYPE, running,
                                 reason if running or not ready
                                 else conditions.REBALANCE_COMPLETE,
                                 message, generation, previous, now),
            conditions.condition(conditions.READY, ready,
                                 conditions.REBALANCE_COMPLETE if ready else reason,
                                 message, generation, previous, now),
        ],
    }
