"""The ``Rebalance`` reconcile and deletion: the I/O shell around ``rebalance_resource``.

One pass (on create/update/resume and on a kopf timer; idempotent, serialised per Broker by a
lock so two Rebalances of one Broker never both start a batch — the Broker's own lock
(``broker.lock``), so a Broker pass, whose scale-down drain starts batches too, is not
concurrent with it either):

1. the spec (``read_spec``; bad -> ``NotReady`` / ``InvalidSpec``) and the Broker (missing or
   being deleted -> ``NotReady`` / ``BrokerNotFound``);
2. a batch in flight (``status.inFlight``) is checked with ListPartitionReassignments and
   Metadata: still moving -> wait (a batch the controller dropped is sent again); done -> its
   throttles are cleared (``status.throttle``) and ``progress.batchesDone`` counts it;
3. ``next_step`` decides: propose (the cluster's brokers and assignment -> ``propose``; the
   batches kept in ``status.plan``, so what runs is what was approved; refused ->
   ``ProposalRefused``), wait for the approve annotation, refuse while another rebalance of the
   Broker runs (another Rebalance in state ``Rebalancing``, or the Broker's own, its
   ``Rebalancing`` condition True: ``AnotherRebalanceRunning``), send the next batch
   (throttled with ``spec.throttle``, else ``STRATA_OPERATOR_REBALANCE_THROTTLE``, through
   ``throttle.plan_throttles``; cleared again if the batch is refused), elect the preferred
   leaders of the planned partitions, or ``Ready``.
A spec change before any batch ran proposes again. ``Ready`` and ``Stopped`` are final.
Events (``events.py``): the proposal, its refusal, the approval, each batch, completion, a
missing Broker, a refusal for another run, a stop; each once per change.

Deletion (kopf's finalizer): a batch in flight is waited for (it cannot be taken back), then
its throttles are cleared and a ``RebalanceStopped`` Event posted; with the cluster
unreachable the finalizer is released after ``STRATA_OPERATOR_TOPIC_DELETE_TIMEOUT``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from strata.operator import conditions, events
from strata.operator import rebalance_resource as rr
from strata.operator.broker import ClusterFactory, connect, default_cluster
from strata.operator.broker import lock as broker_lock
from strata.operator.kafka import Cluster, KafkaOperationError
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.operator.rebalance import send_throttled_batch
from strata.operator.settings import SETTINGS
from strata.operator.throttle import ThrottlePlan

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
KIND = "Rebalance"

# The (reason, message) last posted as an Event per Rebalance (namespace, name, uid).
_posted: dict[tuple[str, str, str], tuple[str, str]] = {}


def _targets(entries: Any) -> dict[TopicPartition, tuple[int, ...]]:
    return {(str(e["topic"]), int(e["partition"])): tuple(int(r) for r in e["replicas"])
            for e in entries or ()}


def _entries(targets: Mapping[TopicPartition, tuple[int, ...]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "replicas": list(r)}
            for (t, p), r in sorted(targets.items())]


def _live_broker(kube: Kube, namespace: str, name: str) -> Obj | None:
    broker = kube.read("Broker", namespace, name)
    if broker is None or (broker.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return broker


def _cluster(kube: Kube, namespace: str, broker: Obj, factory: ClusterFactory) -> Cluster:
    names = BrokerNames(broker["metadata"]["name"], namespace)
    try:
        spec = BrokerSpec.parse(broker.get("spec") or {}, names.name)
    except SpecError:
        spec = BrokerSpec()
    return connect(kube, names, spec, factory)


def other_running(kube: Kube, body: Mapping[str, Any], broker: Mapping[str, Any],
                  started: bool = False) -> str | None:
    """Another rebalance of the same Broker in progress: the Broker's own (its Rebalancing
    condition True: scale-up, scale-down drain or annotation) or another Rebalance running. A
    Rebalance that ``started`` is not held back by a Broker run still ``Pending`` (that one
    waits for it: ``rebalance.run_pass``), so neither waits for the other forever; a drain
    moving partitions (reason ``ReassigningPartitions``) started first, so it holds back
    every Rebalance (a drain that has not started waits for a running one: ``drain.py``)."""
    metadata = body["metadata"]
    own = conditions.find(broker.get("status"), conditions.REBALANCING)
    pending = ((broker.get("status") or {}).get("rebalance") or {}).get("state") == "Pending"
    own_pending = pending and (own or {}).get("reason") != conditions.REASSIGNING
    if own is not None and own.get("status") == "True" and not (started and own_pending):
        return f"Broker {broker['metadata']['name']} ({own.get('reason')})"
    ref = (body.get("spec") or {}).get("brokerRef")
    for item in kube.list(KIND, metadata["namespace"]):
        if (item["metadata"]["name"] != metadata["name"]
                and (item.get("spec") or {}).get("brokerRef") == ref
                and (item.get("status") or {}).get("state") == rr.REBALANCING):
            return f"Rebalance {item['metadata']['name']}"
    return None


def reconcile(body: Mapping[str, Any], kube: Kube,
              cluster_factory: ClusterFactory = default_cluster) -> Obj:
    """One pass over a Rebalance; returns the status it wrote (or found current)."""
    metadata = body["metadata"]
    old = body.get("status") or {}
    if metadata.get("deletionTimestamp") or old.get("state") in (rr.READY, rr.STOPPED):
        return dict(old)
    ref = str((body.get("spec") or {}).get("brokerRef") or "")
    with broker_lock(metadata["namespace"], ref):
        fresh = kube.read(KIND, metadata["namespace"], metadata["name"])  # another pass may
        if fresh is None:  # have moved it on while this one waited for the lock
            return dict(old)
        return _Pass(fresh, kube, cluster_factory).run()


class _Pass:
    """One reconcile pass: the old status read once, the new one written by ``write``."""

    def __init__(self, body: Mapping[str, Any], kube: Kube, factory: ClusterFactory) -> None:
        self.body, self.kube, self.factory = body, kube, factory
        metadata = body["metadata"]
        self.namespace, self.name = metadata["namespace"], metadata["name"]
        self.generation = metadata.get("generation")
        self.key = (self.namespace, self.name, str(metadata.get("uid", "")))
        self.old: Mapping[str, Any] = body.get("status") or {}
        progress = self.old.get("progress") or {}
        self.done = int(progress.get("batchesDone", 0))
        self.elected = bool(progress.get("leadersElected"))
        self.flight = _targets(self.old.get("inFlight"))
        self.throttle: Mapping[str, Any] | None = self.old.get("throttle") or None
        started = self.done > 0 or bool(self.flight)
        self.proposal: dict[str, Any] | None = dict(self.old.get("proposal") or {}) or None
        if (self.proposal is not None and not started
                and self.proposal.get("generation") != self.generation):
            self.proposal = None  # the spec changed before anything moved: propose again
        self.plan = rr.plan_from_status(self.old.get("plan")) if self.proposal else []

    # ------------------------------------------------------------------ writing
    def write(self, state: str, reason: str, message: str, event: str | None = None,
              event_reason: str | None = None, event_message: str | None = None) -> Obj:
        """Patch the status (only if it changed); ``event``: post one (Normal or Warning),
        once per (reason, message) — by default the condition's."""
        proposal_message = ""
        if self.proposal:
            proposal_message = (f"{self.proposal['moves']} replica moves, "
                                f"{self.proposal['leaderChanges']} leader changes in "
                                f"{self.proposal['batches']} batches")
        status = rr.build_status(
            state=state, reason=reason, message=message,
            has_proposal=self.proposal is not None, proposal_message=proposal_message,
            generation=self.generation, previous=self.old.get("conditions") or (),
            proposal=self.proposal,
            plan=[{"batch": i, **e} for i, b in enumerate(self.plan) for e in _entries(b)]
            if self.proposal else None,
            progress=rr.progress(self.done, len(self.plan), self.elected),
            inFlight=_entries(self.flight) if self.flight else None,
            throttle=dict(self.throttle) if self.throttle else None)
        if conditions.status_changed(self.old, status):
            self.kube.patch_status(KIND, self.namespace, self.name, status)
        posting = (event_reason or reason, event_message or message)
        if event is not None and _posted.get(self.key) != posting:
            events.record(self.kube, self.body, event, *posting)
            _posted[self.key] = posting
        return status

    # ------------------------------------------------------------------ the pass
    def run(self) -> Obj:
        try:
            spec = rr.read_spec(self.body.get("spec") or {})
        except rr.ProposalError as exc:
            return self.write(rr.NOT_READY, conditions.INVALID_SPEC, str(exc), events.WARNING)
        broker = _live_broker(self.kube, self.namespace, spec.broker_ref)
        if broker is None:
            step = rr.next_step(broker_exists=False, has_proposal=False, is_approved=False,
                                other_running=None, batches_done=0, batches_total=0,
                                leaders_elected=False, deleting=False)
            return self.write(rr.NOT_READY, step.reason,
                              f"Broker {self.namespace}/{spec.broker_ref} does not exist",
                              events.WARNING)
        cluster = _cluster(self.kube, self.namespace, broker, self.factory)
        try:
            return self._advance(spec, broker, cluster)
        except KafkaOperationError as exc:
            return self.write(str(self.old.get("state") or rr.PENDING_PROPOSAL),
                              conditions.KAFKA_ERROR, f"cannot go on: {exc}", events.WARNING)

    def _advance(self, spec: rr.RebalanceSpec, broker: Obj, cluster: Cluster) -> Obj:
        total = len(self.plan)
        if self.flight:
            ongoing = cluster.ongoing_reassignments()
            assignment = cluster.assignment()
            moving = [tp for tp, r in self.flight.items() if assignment.get(tp) != r]
            if ongoing or moving:
                if not ongoing:  # dropped by the controller: the same targets again
                    cluster.reassign(self.flight)
                return self.write(rr.REBALANCING, conditions.REBALANCING_REASON,
                                  f"batch {self.done + 1}/{total}: "
                                  f"{len(ongoing) or len(moving)} partitions still moving")
            if self.throttle:
                cluster.clear_throttle(ThrottlePlan.from_status(self.throttle))
                self.throttle = None
            self.flight = {}
            self.done += 1
            self.write(rr.REBALANCING, conditions.REBALANCING_REASON,
                       f"batch {self.done}/{total} moved", events.NORMAL)
        approved = rr.approved(self.body["metadata"].get("annotations") or {})
        started = self.done > 0 or self.old.get("state") == rr.REBALANCING
        other = (other_running(self.kube, self.body, broker, started)
                 if self.proposal and approved and self.done < total else None)
        step = rr.next_step(broker_exists=True, has_proposal=self.proposal is not None,
                            is_approved=approved, other_running=other,
                            batches_done=self.done, batches_total=total,
                            leaders_elected=self.elected, deleting=False)
        if step.action == "propose":
            return self._propose(spec, cluster)
        if step.action == "wait-approval":
            return self.write(rr.PROPOSAL_READY, step.reason, step.message)
        if step.action == "blocked":
            return self.write(rr.NOT_READY, step.reason, step.message, events.WARNING)
        if step.action == "run-batch":
            return self._send_batch(spec, cluster)
        if step.action == "elect-leaders":
            planned = {tp: r for batch in self.plan for tp, r in batch.items()}
            leaders = cluster.leaders()
            elect = sorted(tp for tp, r in planned.items()
                           if r and tp in leaders and leaders[tp] != r[0])
            cluster.elect_preferred_leaders(elect)
            self.elected = True
        moves = (self.proposal or {}).get("moves", 0)
        return self.write(rr.READY, conditions.REBALANCE_COMPLETE,
                          f"{total} batches done ({moves} replica moves); preferred leaders "
                          "elected", events.NORMAL)

    def _propose(self, spec: rr.RebalanceSpec, cluster: Cluster) -> Obj:
        try:
            proposal = rr.propose(spec, cluster.racks(), cluster.assignment(),
                                  SETTINGS.rebalance_batch_size)
        except rr.ProposalError as exc:
            self.proposal, self.plan = None, []
            return self.write(rr.NOT_READY, "ProposalRefused", str(exc), events.WARNING)
        self.proposal = {**proposal.status(), "generation": self.generation}
        self.plan = list(proposal.batches)
        self.done, self.elected = 0, False
        waiting = rr.next_step(broker_exists=True, has_proposal=True, is_approved=False,
                               other_running=None, batches_done=0,
                               batches_total=len(self.plan), leaders_elected=False,
                               deleting=False)
        return self.write(rr.PROPOSAL_READY, waiting.reason, waiting.message, events.NORMAL,
                          rr.PROPOSAL_READY,
                          f"{proposal.replica_moves} replica moves, {proposal.leader_changes} "
                          f"leader changes in {len(proposal.batches)} batches; annotate "
                          f'{rr.APPROVE_ANNOTATION}="true" to execute')

    def _send_batch(self, spec: rr.RebalanceSpec, cluster: Cluster) -> Obj:
        batch = self.plan[self.done]
        if self.done == 0 and self.old.get("state") != rr.REBALANCING:
            events.record(self.kube, self.body, events.NORMAL, "RebalanceApproved",
                          f"approved: executing {len(self.plan)} batches")
        rate = SETTINGS.rebalance_throttle if spec.throttle is None else spec.throttle
        throttles = send_throttled_batch(cluster, cluster.assignment(), batch, rate)
        self.flight = dict(batch)
        self.throttle = throttles.to_status() if not throttles.empty else None
        return self.write(rr.REBALANCING, conditions.REBALANCING_REASON,
                          f"batch {self.done + 1}/{len(self.plan)}: moving {len(batch)} "
                          f"partitions" + (f" (throttled at {rate} bytes/s)" if rate else ""),
                          events.NORMAL)


def delete(body: Mapping[str, Any], kube: Kube, runtime_s: float,
           cluster_factory: ClusterFactory = default_cluster) -> str:
    """Stop: wait for the batch in flight, clear its throttles (see the module docstring)."""
    metadata = body["metadata"]
    namespace = metadata["namespace"]
    status = body.get("status") or {}
    flight = _targets(status.get("inFlight"))
    throttle = status.get("throttle")
    if not flight and not throttle:
        return "nothing in flight"
    ref = str((body.get("spec") or {}).get("brokerRef") or "")
    broker = _live_broker(kube, namespace, ref)
    if broker is None:
        return f"Broker {ref} is gone"
    give_up = runtime_s >= SETTINGS.topic_delete_timeout
    with broker_lock(namespace, ref):
        try:
            cluster = _cluster(kube, namespace, broker, cluster_factory)
            if flight and not give_up:
                assignment = cluster.assignment()
                if cluster.ongoing_reassignments() or any(
                        assignment.get(tp) != r for tp, r in flight.items()):
                    raise kopf.TemporaryError("waiting for the batch in flight", delay=1)
            if throttle:
                cluster.clear_throttle(ThrottlePlan.from_status(throttle))
        except KafkaOperationError as exc:
            if not give_up:
                raise kopf.TemporaryError(f"cannot stop yet: {exc}", delay=5) from exc
            logger.warning("Rebalance %s/%s: released with the cluster unreachable: %s",
                           namespace, metadata["name"], exc)
    done = int((status.get("progress") or {}).get("batchesDone", 0))
    message = f"stopped after {done + (1 if flight else 0)} batches; throttles cleared"
    events.record(kube, body, events.NORMAL, "RebalanceStopped", message)
    return message
