"""Status conditions (Kubernetes convention, Strimzi's shape): pure functions, no I/O.

Owns the ``Ready`` condition and its CamelCase reasons. Invariant: ``lastTransitionTime`` moves
only when ``status`` changes, so a reconcile that finds nothing new leaves it alone (and a
status patch with no difference is skipped by the caller).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

READY: Final = "Ready"

# Broker reasons.
BROKERS_READY: Final = "BrokersReady"
CREATING: Final = "Creating"
PODS_NOT_READY: Final = "PodsNotReady"
ROLLING_RESTART: Final = "RollingRestart"
WAITING_FOR_IN_SYNC_REPLICAS: Final = "UnderReplicatedPartitions"
CLUSTER_UNREACHABLE: Final = "ClusterUnreachable"
SCALE_DOWN_BLOCKED: Final = "ScaleDownBlocked"
INVALID_SPEC: Final = "InvalidSpec"

# Topic reasons.
TOPIC_READY: Final = "TopicReady"
RESOURCE_CONFLICT: Final = "ResourceConflict"
BROKER_NOT_FOUND: Final = "BrokerNotFound"
KAFKA_ERROR: Final = "KafkaError"
PARTITIONS_DRIFT: Final = "PartitionDecreaseNotPossible"


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).replace(microsecond=0).isoformat().replace(
        "+00:00", "Z")


def ready_condition(
    ready: bool,
    reason: str,
    message: str,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] = (),
    now: str | None = None,
) -> dict[str, Any]:
    """The ``Ready`` condition, keeping the previous ``lastTransitionTime`` if status is unchanged.
    """
    status = "True" if ready else "False"
    before = next((c for c in previous if c.get("type") == READY), None)
    if before is not None and before.get("status") == status and before.get("lastTransitionTime"):
        since = str(before["lastTransitionTime"])
    else:
        since = now or now_iso()
    condition: dict[str, Any] = {"type": READY, "status": status, "reason": reason,
                                 "message": message, "lastTransitionTime": since}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


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
