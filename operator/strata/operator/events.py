"""Kubernetes Events (core ``v1`` Event) about Brokers and Topics: what the operator did or
refused, visible in ``kubectl describe`` and ``kubectl get events``.

Owns the Event object (``build_event``: pure, the time injected) and ``record``, which posts
it through the operator's ``Kube``. Invariants: the Event names its object by apiVersion, kind,
namespace, name and uid (``involvedObject``); ``type`` is ``Normal`` or ``Warning``; ``reason``
is CamelCase, the condition reasons' vocabulary; the message is cut to 1024 characters (the
API server's limit). Posting an Event never fails a reconcile: an error is logged and dropped.
The caller decides when something is worth an Event (a roll, a scale, a resize, a refusal, a
failure), once per change, not once per pass.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from strata.operator import conditions
from strata.operator.conditions import now_iso
from strata.operator.kube import Kube, Obj

logger = logging.getLogger(__name__)

NORMAL: Final = "Normal"
WARNING: Final = "Warning"
COMPONENT: Final = "strata-operator"
MAX_MESSAGE: Final = 1024


def build_event(involved: Mapping[str, Any], event_type: str, reason: str, message: str,
                now: str, suffix: str) -> Obj:
    """A core v1 Event about ``involved`` (a Broker, Topic or any object with metadata)."""
    if event_type not in (NORMAL, WARNING):
        raise ValueError(f"event type must be {NORMAL} or {WARNING}, got {event_type!r}")
    metadata = involved.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = str(metadata.get("name", ""))
    reference: Obj = {"apiVersion": involved.get("apiVersion", ""),
                      "kind": involved.get("kind", ""), "namespace": namespace, "name": name}
    if metadata.get("uid"):
        reference["uid"] = metadata["uid"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name[:200]}.{suffix}", "namespace": namespace},
        "involvedObject": reference,
        "type": event_type,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "action": reason,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def record(kube: Kube, involved: Mapping[str, Any], event_type: str, reason: str,
           message: str) -> Obj | None:
    """Post an Event; None (logged) if the API server refused it."""
    event = build_event(involved, event_type, reason, message, now_iso(), uuid.uuid4().hex[:16])
    (logger.warning if event_type == WARNING else logger.info)(
        "%s %s/%s: %s: %s", event["involvedObject"]["kind"], event["metadata"]["namespace"],
        event["involvedObject"]["name"], reason, message)
    try:
        return kube.create(event)
    except (ApiException, OSError) as exc:  # a courtesy: never let it fail the reconcile
        logger.warning("could not post event %s: %s", reason, exc)
        return None


StatusWriter = Callable[..., Obj]
"""``write(ready, reason, message, **extra) -> status``."""


def ready_status_writer(kube: Kube, kind: str, body: Mapping[str, Any],
                        posted: dict[tuple[str, str, str], str],
                        keep: Sequence[str] = ()) -> StatusWriter:
    """The status writer of one reconcile pass of a resource with a single Ready condition
    (Topic, User): patches the status only when it changed, and posts an Event when the
    reason is new — neither the one the status already shows nor the last one posted for this
    object (``posted``, keyed by namespace, name and uid). ``keep``: status fields carried over
    from the old status unless ``extra`` sets them."""
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    generation = metadata.get("generation")
    old_status = body.get("status") or {}
    previous = old_status.get("conditions") or ()
    key = (namespace, name, str(metadata.get("uid", "")))

    def write(ready: bool, reason: str, message: str, **extra: Any) -> Obj:
        status: Obj = {**{k: old_status[k] for k in keep if k in old_status},
                       "observedGeneration": generation, **extra, "conditions": [
                           conditions.ready_condition(ready, reason, message, generation,
                                                      previous)]}
        if conditions.status_changed(old_status, status):
            kube.patch_status(kind, namespace, name, status)
        if reason not in (conditions.ready_reason(old_status)[1], posted.get(key)):
            record(kube, body, NORMAL if ready else WARNING, reason, message)
        posted[key] = reason
        return status

    return write
