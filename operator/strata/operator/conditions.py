"""Status conditions (Kubernetes convention, Strimzi's shape): pure functions, no I/O.

Owns the condition types (``Ready``, and per concern ``Reconciling``, ``ScaleDownBlocked``,
``StorageResizing``, ``Rebalancing``), their CamelCase reasons, and ``observedGeneration`` on
each. Invariant: ``lastTransitionTime`` moves
only when ``status`` changes, so a reconcile that finds nothing new leaves it alone (and a
status patch with no difference is skipped by the caller).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
SCALE_DOWN_BLOCKED_TYPE: Final = "ScaleDownBlocked"
STORAGE_RESIZING: Final = "StorageResizing"
REBALANCING: Final = "Rebalancing"

# Broker reasons.
BROKERS_READY: Final = "BrokersReady"
CREATING: Final = "Creating"
PODS_NOT_READY: Final = "PodsNotReady"
ROLLING_RESTART: Final = "RollingRestart"
WAITING_FOR_IN_SYNC_REPLICAS: Final = "UnderReplicatedPartitions"
CLUSTER_UNREACHABLE: Final = "ClusterUnreachable"
SCALE_DOWN_BLOCKED: Final = "ScaleDownBlocked"
INVALID_SPEC: Final = "InvalidSpec"
RECONCILED: Final = "Reconciled"
SCALING: Final = "Scaling"
RESIZING: Final = "VolumesResizing"
VOLUMES_AT_SIZE: Final = "VolumesAtSize"
STORAGE_DECREASE: Final = "StorageDecreaseNotPossible"
EXPANSION_REFUSED: Final = "VolumeExpansionRefused"
REASSIGNING: Final = "ReassigningPartitions"
BALANCED: Final = "NoReassignment"
REBALANCE_STARTED: Final = "RebalanceStarted"
REBALANCING_REASON: Final = "Rebalancing"
REBALANCE_COMPLETE: Final = "RebalanceComplete"

# Topic reasons.
TOPIC_READY: Final = "TopicReady"
RESOURCE_CONFLICT: Final = "ResourceConflict"
BROKER_NOT_FOUND: Final = "BrokerNotFound"
KAFKA_ERROR: Final = "KafkaError"
PARTITIONS_DRIFT: Final = "PartitionDecreaseNotPossible"
INVALID_REPLICATION_FACTOR: Final = "InvalidReplicationFactor"
REASSIGNMENT_IN_PROGRESS: Final = "ReassignmentInProgress"
REASSIGNMENT_NOT_SERVED: Final = "ReassignmentNotServed"


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).replace(microsecond=0).isoformat().replace(
        "+00:00", "Z")


def condition(
    kind: str,
    true: bool,
    reason: str,
    message: str,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] = (),
    now: str | None = None,
) -> dict[str, Any]:
    """A condition of type ``kind``, keeping the previous ``lastTransitionTime`` if its status
    is unchanged."""
    status = "True" if true else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    if before is not None and before.get("status") == status and before.get("lastTransitionTime"):
        since = str(before["lastTransitionTime"])
    else:
        since = now or now_iso()
    result: dict[str, Any] = {"type": kind, "status": status, "reason": reason,
                              "message": message, "lastTransitionTime": since}
    if generation is not None:
        result["observedGeneration"] = generation
    return result


def ready_condition(
    ready: bool,
    reason: str,
    message: str,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] = (),
    now: str | None = None,
) -> dict[str, Any]:
    """The ``Ready`` condition."""
    return condition(READY, ready, reason, message, generation, previous, now)


def find(status: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind`` in a CR's status, or None."""
    for item in (status or {}).get("conditions") or ():
        if item.get("type") == kind:
            return item  # type: ignore[no-any-return]  # JSON from the API server
    return None


def ready_reason(status: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(status, reason) of the Ready condition in a CR's status, or (None, None)."""
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == READY:
            return condition.get("status"), condition.get("reason")
    return None, None


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether patching ``new`` over ``old`` would change anything."""
    old = old or {}
    return any(old.get(key) != value for key, value in new.items())
