"""Adding and removing JBOD volumes of a running Broker: the I/O around ``jbod.py``'s pure
decisions, one step per reconcile pass.

* ``effective_spec``: the spec the brokers run with (a leaving volume stays in the
  StatefulSet and ``log.dirs`` until its data is moved off), after one ``drain`` pass when a
  volume is leaving.
* ``drain``: DescribeLogDirs on every broker (``log_dirs.py``); each broker with replicas in a
  leaving dir gets its next AlterReplicaLogDirs batch (``jbod.plan_moves``: to the kept dir
  with the fewest partitions, one batch in flight per broker). Drained only when every broker
  of the StatefulSet answered and none has a replica (current or future) left in a leaving
  dir. A broker that cannot be asked, or refuses a move, keeps the volume and says why.
* ``recreate``: a live StatefulSet whose claim templates differ from the desired ones is
  deleted with ``propagationPolicy: Orphan`` (its pods keep running; the StatefulSet made
  next is their owner again) and ``apply`` creates it at once; the changed ``log.dirs`` then
  rolls the brokers through the config hash (the gated roll, ``rolling.py``).
* ``delete_claims``: once no pod mounts them, the claims of a ``remove: true`` volume with
  ``deleteClaim``.

A broker not yet rolled still has a removed volume's dir in ``log.dirs`` and may place a new
partition there (no cordoned log dirs, KIP-1066), so the volumes a pod still mounts are
drained too, and the roll holds while any replica is left (``effective_spec``'s outcome).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from strata.operator import builders, conditions, events, jbod, log_dirs
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec

logger = logging.getLogger(__name__)

VOLUME_REMOVING = "VolumeRemoving"
MOVING_REPLICAS = "MovingReplicas"
VOLUMES_REMOVED = "VolumesRemoved"
LOG_DIRS_UNAVAILABLE = "LogDirsUnavailable"
MOVE_REFUSED = "MoveRefused"


@dataclasses.dataclass(frozen=True, slots=True)
class DrainOutcome:
    drained: bool
    reason: str  # MovingReplicas, LogDirsUnavailable, MoveRefused, VolumesRemoved
    message: str
    left: int = 0  # replicas still in the leaving dirs, over every broker
    moved: int = 0  # moves started by this pass

    def status(self, volumes: Sequence[jbod.Volume]) -> Obj:
        return {"volumes": [v.id for v in volumes], "replicasLeft": self.left,
                "state": self.reason, "message": self.message}


def drain(bootstrap: str, leaving: Sequence[str], expected: Sequence[int], timeout: float,
          batch_size: int, settings: Callable[[], Mapping[str, str]] = dict) -> DrainOutcome:
    """One pass moving replicas out of the ``leaving`` log dirs of the brokers ``expected``
    (every one must answer before the dirs count as empty); ``settings``: the client's
    librdkafka security properties."""
    try:
        client_config = settings()
        addresses = log_dirs.brokers(bootstrap, timeout, client_config)
        missing = sorted(set(expected) - set(addresses))
        if missing:
            return DrainOutcome(False, LOG_DIRS_UNAVAILABLE,
                                f"brokers {missing} are not in the cluster's metadata")
        left = moved = 0
        for node in sorted(expected):
            plan = jbod.plan_moves(log_dirs.describe(addresses[node], timeout, client_config),
                                   leaving, batch_size)
            left += plan.left
            if plan.refused:
                return DrainOutcome(False, MOVE_REFUSED, f"broker {node}: {plan.refused}",
                                    left)
            if not plan.moves:
                continue
            refused = log_dirs.alter(addresses[node], plan.moves, timeout, client_config)
            if refused:
                return DrainOutcome(False, MOVE_REFUSED, f"broker {node} refused "
                                    f"AlterReplicaLogDirs: {sorted(refused.items())[:5]}",
                                    left)
            moved += len(plan.moves)
            logger.info("broker %d: moving %d replicas out of %s", node, len(plan.moves),
                        ", ".join(leaving))
    except (log_dirs.LogDirsUnavailable, OSError) as exc:
        return DrainOutcome(False, LOG_DIRS_UNAVAILABLE, str(exc))
    if left:
        return DrainOutcome(False, MOVING_REPLICAS,
                            f"{left} replicas left in {', '.join(leaving)}; "
                            f"{moved} moves started", left, moved)
    return DrainOutcome(True, VOLUMES_REMOVED, f"no replica left in {', '.join(leaving)}")


def effective_spec(kube: Kube, names: BrokerNames, spec: BrokerSpec,
                   live_sts: Mapping[str, Any] | None, bootstrap: str, replicas: int,
                   timeout: float, batch_size: int,
                   settings: Callable[[], Mapping[str, str]] = dict,
                   ) -> tuple[BrokerSpec, DrainOutcome | None, tuple[jbod.Volume, ...]]:
    """The spec the brokers run with, the drain pass's outcome (None: no volume leaving) and
    the leaving volumes: those of the live StatefulSet, and those a pod not yet rolled still
    mounts (a partition created there meanwhile is moved off before that broker restarts:
    the roll waits while the outcome is not drained)."""
    if not spec.storage.jbod_volumes:
        return spec, None, ()
    live = jbod.live_templates(live_sts)
    pods = kube.list("Pod", names.namespace, builders.selector_labels(names, "broker"))
    mounted = sorted({t for p in pods for t in _pod_templates(p)})
    by_id = {v.id: v for templates in (mounted, live)
             for v in jbod.leaving_volumes(spec.storage.jbod_volumes, templates)}
    leaving = tuple(by_id[i] for i in sorted(i for i in by_id if i is not None))
    outcome = None
    if leaving:
        outcome = drain(bootstrap, [v.log_dir for v in leaving], range(replicas), timeout,
                        batch_size, settings)
    volumes = jbod.effective_volumes(spec.storage.jbod_volumes, live,
                                     outcome is None or outcome.drained)
    return dataclasses.replace(spec, storage=dataclasses.replace(
        spec.storage, jbod_volumes=volumes)), outcome, leaving


def recreate(kube: Kube, body: Mapping[str, Any], live_sts: Mapping[str, Any] | None,
             desired: Mapping[str, Any]) -> bool:
    """Delete the live StatefulSet, orphaning its pods, when its claim templates must change;
    True when it did (``apply`` creates the new one next)."""
    live = jbod.live_templates(live_sts)
    wanted = jbod.live_templates(desired)
    if live_sts is None or not jbod.needs_recreate(live, wanted):
        return False
    if (live_sts.get("metadata") or {}).get("deletionTimestamp"):
        return True  # still being deleted (the orphan finalizer): created once it is gone
    meta = desired["metadata"]
    if kube.delete("StatefulSet", meta["namespace"], meta["name"], propagation_policy="Orphan"):
        events.record(kube, body, events.NORMAL, conditions.RECONCILING,
                      f"StatefulSet {meta['name']} re-created with claim templates "
                      f"{', '.join(wanted)} (was {', '.join(live)}); pods kept")
    return True


def delete_claims(kube: Kube, names: BrokerNames, spec: BrokerSpec,
                  body: Mapping[str, Any]) -> list[str]:
    """Delete the claims of removed ``deleteClaim`` volumes no pod mounts any more."""
    if not any(v.remove and v.delete_claim for v in spec.storage.jbod_volumes):
        return []
    selector = builders.selector_labels(names, "broker")
    claims = [c["metadata"]["name"]
              for c in kube.list("PersistentVolumeClaim", names.namespace, selector)]
    mounted = [str((v.get("persistentVolumeClaim") or {}).get("claimName", ""))
               for p in kube.list("Pod", names.namespace, selector)
               for v in (p.get("spec") or {}).get("volumes") or ()]
    mounted += [f"{t}-{p['metadata']['name']}"  # a pod mounts its templates' claims
                for p in kube.list("Pod", names.namespace, selector)
                for t in _pod_templates(p)]
    doomed = jbod.claims_of_removed(spec.storage.jbod_volumes, names.stateful_set, claims,
                                    mounted)
    for name in doomed:
        if kube.delete("PersistentVolumeClaim", names.namespace, name):
            events.record(kube, body, events.NORMAL, conditions.RECONCILING,
                          f"claim {name} of a removed volume deleted (deleteClaim)")
    return doomed


def _pod_templates(pod: Mapping[str, Any]) -> list[str]:
    """The claim templates a pod made by the StatefulSet mounts: its ``data-<id>`` mounts."""
    containers = (pod.get("spec") or {}).get("containers") or ()
    return [str(m.get("name")) for c in containers for m in c.get("volumeMounts") or ()
            if jbod.template_id(str(m.get("name", ""))) is not None]


def condition(outcome: DrainOutcome | None, generation: int | None,
              previous: Sequence[Mapping[str, Any]]) -> Obj:
    """``VolumeRemoving``: True while replicas are moved off a leaving volume."""
    if outcome is None or outcome.drained:
        return conditions.condition(VOLUME_REMOVING, False, VOLUMES_REMOVED,
                                    outcome.message if outcome else "no volume is leaving",
                                    generation, previous)
    return conditions.condition(VOLUME_REMOVING, True, outcome.reason, outcome.message,
                                generation, previous)


def report(status: Obj, outcome: DrainOutcome | None, leaving: Sequence[jbod.Volume],
           old_status: Mapping[str, Any], generation: int | None) -> None:
    """Add ``VolumeRemoving`` to the status (once there, it stays) and ``volumeRemoval``
    while a volume is leaving (null once it left: the merge patch removes it)."""
    previous = old_status.get("conditions") or ()
    if outcome is not None or any(c.get("type") == VOLUME_REMOVING for c in previous):
        status["conditions"].append(condition(outcome, generation, previous))
    moving = outcome is not None and not outcome.drained
    if moving or old_status.get("volumeRemoval"):
        status["volumeRemoval"] = outcome.status(leaving) if outcome and moving else None
