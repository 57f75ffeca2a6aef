"""The ``Rebalance`` CustomResourceDefinition (Strimzi's KafkaRebalance): schema, printer columns.

Owns the OpenAPI schema of a Rebalance's ``spec`` (what ``rebalance_resource.read_spec``
reads) and ``status`` (what ``rebalance_resource.build_status`` writes), and the CEL rules
refusing at admission what can never work: ``remove-brokers`` without ``brokers``, and a
changed ``brokerRef`` (the run belongs to one Broker). New at ``v1beta1``: no older version is
served. Generated into ``charts/strata/crds/rebalances.strata.dev.yaml`` with the other CRDs
(``crds.py``).
"""

from __future__ import annotations

from typing import Final

from strata.operator.crd_schema import (
    Schema,
    age_column,
    conditions,
    crd,
    integer,
    obj,
    string,
)
from strata.operator.model import VERSION
from strata.operator.rebalance_resource import MODES, STATES

_TARGET: Final[Schema] = obj("A partition's target replicas.", {
    "topic": string("Topic."), "partition": integer("Partition."),
    "replicas": {"type": "array", "items": {"type": "integer"},
                 "description": "Target replicas, preferred leader first."},
})

REBALANCE_SPEC: Final[Schema] = obj("What to rebalance and how.", {
    "brokerRef": string("brokerRef: the name of the Broker (same namespace) whose cluster is "
                        "rebalanced; cannot change.", minLength=1,
                        **{"x-kubernetes-validations": [{
                            "rule": "self == oldSelf", "message": "brokerRef cannot be changed",
                            "reason": "FieldValueForbidden"}]}),
    "mode": string("mode: full (replicas and preferred leaders within one of even over every "
                   "broker) or remove-brokers (every replica off brokers, then even over the "
                   "rest).", enum=list(MODES), default="full"),
    "brokers": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 256,
                "description": "brokers: the node ids remove-brokers empties."},
    "throttle": integer("throttle: the replication throttle of the moving replicas in bytes/s "
                        "(0: none; absent: the operator's STRATA_OPERATOR_REBALANCE_THROTTLE).",
                        0),
}, ("brokerRef",), **{"x-kubernetes-validations": [
    {"rule": "!has(self.mode) || self.mode != 'remove-brokers' || "
             "(has(self.brokers) && size(self.brokers) > 0)",
     "message": "mode remove-brokers needs brokers"}]})

REBALANCE_STATUS: Final[Schema] = obj("Observed state, written by the operator.", {
    "conditions": conditions(),
    "observedGeneration": integer("The spec generation last reconciled."),
    "state": string("PendingProposal, ProposalReady (waiting for the annotation "
                    "strata.dev/rebalance-approve: \"true\"), Rebalancing, Ready, NotReady "
                    "(refused or blocked: see the conditions) or Stopped.", enum=list(STATES)),
    "proposal": obj("The proposal: what the run moves.", {
        "moves": integer("Replicas copied to a new broker."),
        "leaderChanges": integer("Partitions whose preferred leader changes."),
        "batches": integer("AlterPartitionReassignments batches."),
        "partitions": integer("Partitions whose replica list changes."),
        "generation": integer("The spec generation it was computed for."),
    }),
    "plan": {"type": "array", "description": "The proposal's target replica lists, by batch.",
             "items": obj("One partition of a batch.", {
                 **_TARGET["properties"], "batch": integer("Batch index, from 0.")})},
    "progress": obj("How far the run is.", {
        "batchesDone": integer("Batches moved."),
        "batchesTotal": integer("Batches of the proposal."),
        "summary": string("done/total, for the printer column."),
        "leadersElected": {"type": "boolean",
                           "description": "The preferred-leader election ran."},
    }),
    "inFlight": {"type": "array", "description": "The batch being moved.", "items": _TARGET},
    "throttle": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "description": "The replication throttles set for the batch being moved "
                                "(removed once it is done)."},
})

REBALANCE_CRD: Final = crd(
    "Rebalance", "rebalances", "srb", REBALANCE_SPEC, REBALANCE_STATUS,
    [{"name": "Broker", "type": "string", "jsonPath": ".spec.brokerRef"},
     {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
     {"name": "State", "type": "string", "jsonPath": ".status.state"},
     {"name": "Progress", "type": "string", "jsonPath": ".status.progress.summary"},
     {"name": "Reason", "type": "string",
      "jsonPath": '.status.conditions[?(@.type=="Ready")].reason', "priority": 1},
     age_column()],
    scale=False, versions=(VERSION,),
)
