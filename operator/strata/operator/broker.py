"""The ``Broker`` reconcile: the I/O shell around the pure builders and decisions.

One pass (run on create/update/resume and on a timer, so drift is repaired and rolling restarts
progress without any event; handlers run more than once, so every step is idempotent):

1. Build every owned object (``builders.build_all``) with an ownerReference to the Broker, and
   ``apply`` each: missing ones are created, changed ones patched back (drift repair).
2. Scale-down: the StatefulSet keeps its current size until no partition has a replica on the
   leaving brokers (``rolling.decide_scale``); the drain moves them in throttled batches, one
   in flight at a time, in ``status.scaleDown`` (``drain.py``), and does not start while a
   ``Rebalance`` of this Broker is ``Rebalancing``.
3. Rack awareness: broker pods scheduled on a node get the node's ``rack.topologyKey`` label
   as the annotation ``strata.dev/rack`` (the entrypoint waits for it).
4. Rolling restart: ``rolling.decide_roll`` picks at most one pod to delete. The config hash
   includes the data of the Secrets the pods read at start (``secret_refs``), read at each
   pass: a rotated TLS or inter-broker password Secret rolls the brokers like a config change.
5. SCRAM users (``spec.users``): each password Secret is read, the cluster asked which
   credentials exist, and ``scram_users.plan`` decides the AlterUserScramCredentials upserts
   and deletions; per-user conditions go to ``status.users``. Skipped (no Kafka connection)
   for a Broker that has no users and never had any.
6. Storage: each broker claim whose request is below ``storage.size`` is patched up
   (``volumes.plan_resize``); one asking for more is left alone and reported (a decrease).
   JBOD volumes come and go by re-creating the StatefulSet (``volume_removal.py``).
7. Self-balancing (``rebalance.py``): after a scale-up, on the annotation
   ``strata.dev/rebalance: "true"`` and after a scale-down, one batch of reassignments per
   pass, then a preferred-leader election; progress in ``status.rebalance``.
8. Status is patched explicitly (``status`` subresource), only when it changed: Ready and one
   condition per concern (Reconciling, ScaleDownBlocked, StorageResizing, Rebalancing), each
   with observedGeneration. Rolls, scaling, resizes and reassignments are posted as Events, and
   a Warning when Ready turns False for a reason other than a normal roll or start, or a
   refusal appears (``events.py``).

Passes over one Broker are serialised by a per-Broker lock (the timer and a change handler may
overlap); the passes over its ``Rebalance`` resources take the same lock, so a drain and a
Rebalance never both decide to start at once. The Kafka side comes from ``cluster_factory``
so tests can inject it; ``connect`` gives it the inter-broker listener's address and security
settings (``client_security``), with the inter-broker password and the TLS material read from
their Secrets at each pass (so a rotated Secret is used at once; the operator needs ``get`` on
Secrets).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from strata.operator import (
    builders,
    cluster_ca,
    conditions,
    drain,
    etcd_certs,
    events,
    jbod,
    rebalance,
    rolling,
    scram_users,
    volume_removal,
    volumes,
)
from strata.operator.client_security import TLS_KEYS, client_properties
from strata.operator.kafka import Cluster, KafkaCluster, KafkaOperationError
from strata.operator.kube import Kube, Obj
from strata.operator.metrics import POD_RESTARTS
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.operator.secret_refs import admin_secret_refs, broker_secret_refs, secrets_digest
from strata.operator.settings import SETTINGS

logger = logging.getLogger(__name__)

ClusterFactory = Callable[[str, Mapping[str, str]], Cluster]

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def lock(namespace: str, name: str) -> threading.Lock:
    """The Broker's lock: its passes, and those of its ``Rebalance`` resources, hold it."""
    with _locks_guard:
        return _locks.setdefault((namespace, name), threading.Lock())


def default_cluster(bootstrap: str, client_config: Mapping[str, str]) -> Cluster:
    return KafkaCluster(bootstrap, timeout=SETTINGS.kafka_timeout, client_config=client_config)


def bootstrap_for(names: BrokerNames, spec: BrokerSpec) -> str:
    """Where the operator reaches this Broker's cluster over the Kafka protocol: the
    inter-broker listener of the client Service."""
    return SETTINGS.bootstrap_override or names.bootstrap_servers(
        spec.inter_broker_listener.port)


def _decoded(secret: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode("utf-8")
            for k, v in ((secret or {}).get("data") or {}).items()}


def _secret_data(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    return _decoded(kube.read("Secret", namespace, name))


def secret_digests(kube: Kube, names: BrokerNames, spec: BrokerSpec) -> builders.SecretDigests:
    """Digests of the Secrets the broker and admin pods read at start (each read once)."""
    broker_refs, admin_refs = broker_secret_refs(spec), admin_secret_refs(spec)
    data: dict[str, dict[str, str] | None] = {}
    for name, _keys in admin_refs:
        if name not in data:
            secret = kube.read("Secret", names.namespace, name)
            data[name] = None if secret is None else dict(secret.get("data") or {})
    return builders.SecretDigests(secrets_digest(broker_refs, data),
                                  secrets_digest(admin_refs, data) if spec.admin_enabled else "")


def client_config(kube: Kube, names: BrokerNames, spec: BrokerSpec) -> dict[str, str]:
    """librdkafka settings for the inter-broker listener, secrets read from their Secrets
    (none for a PLAINTEXT listener, so nothing is read then)."""
    listener = spec.inter_broker_listener
    if listener.protocol == "PLAINTEXT":
        return {}
    pem: dict[str, str] = {}
    if spec.security.tls_secret and listener.protocol in ("SSL", "SASL_SSL"):
        data = _secret_data(kube, names.namespace, spec.security.tls_secret)
        pem = {k: data[k] for k in TLS_KEYS if k in data}
    config = client_properties(spec, pem=pem)
    password = spec.security.inter_broker_password
    if listener.mechanism and password is not None:
        config["sasl.password"] = _secret_data(kube, names.namespace,
                                               password.name).get(password.key, "")
    return config


def connect(kube: Kube, names: BrokerNames, spec: BrokerSpec,
            cluster_factory: ClusterFactory) -> Cluster:
    return cluster_factory(bootstrap_for(names, spec), client_config(kube, names, spec))


def pod_view(pod: Mapping[str, Any]) -> rolling.PodView:
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name", ""))
    suffix = name.rsplit("-", 1)[-1]
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or ())
    return rolling.PodView(
        name=name,
        ordinal=int(suffix) if suffix.isdigit() else -1,
        ready=ready,
        config_hash=(metadata.get("annotations") or {}).get(builders.CONFIG_HASH_ANNOTATION),
        terminating=bool(metadata.get("deletionTimestamp")),
    )


def label_racks(kube: Kube, pods: list[Obj], topology_key: str) -> None:
    """Copy each scheduled pod's node label ``topology_key`` onto the pod (``strata.dev/rack``)."""
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or builders.RACK_ANNOTATION in annotations:
            continue
        node = kube.read("Node", None, node_name)
        rack = ((node or {}).get("metadata") or {}).get("labels", {}).get(topology_key)
        if rack:
            kube.patch("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"],
                       {"metadata": {"annotations": {builders.RACK_ANNOTATION: rack}}})


def reconcile(body: Mapping[str, Any], kube: Kube,
              cluster_factory: ClusterFactory = default_cluster) -> Obj:
    """One pass over a Broker; returns the status it wrote (or found current). The Broker is
    read again once the lock is held: a pass that waited for another one must see the status
    it wrote (the drain's and the rebalance's batch in flight and throttles)."""
    metadata = body["metadata"]
    with lock(metadata["namespace"], metadata["name"]):
        fresh = kube.read("Broker", metadata["namespace"], metadata["name"])
        if fresh is None:  # deleted meanwhile: its owned objects go with it
            return dict(body.get("status") or {})
        return _reconcile(fresh, kube, cluster_factory)


def _reconcile(body: Mapping[str, Any], kube: Kube, cluster_factory: ClusterFactory) -> Obj:
    metadata = body["metadata"]
    names = BrokerNames(metadata["name"], metadata["namespace"])
    generation = metadata.get("generation")
    old_status = body.get("status") or {}
    previous = old_status.get("conditions") or ()
    try:
        spec = BrokerSpec.parse(body.get("spec") or {}, names.name)
    except SpecError as exc:
        status: Obj = {"observedGeneration": generation, "conditions": [
            conditions.ready_condition(False, conditions.INVALID_SPEC, str(exc), generation,
                                       previous)]}
        _write_status(kube, names, old_status, status, body)
        return status

    cluster: Cluster | None = None

    def get_cluster() -> Cluster:
        nonlocal cluster
        if cluster is None:
            cluster = connect(kube, names, spec, cluster_factory)
        return cluster

    # Scale-down first moves partitions off the brokers that go, in throttled batches.
    live_sts = kube.read("StatefulSet", names.namespace, names.stateful_set)
    current = int(((live_sts or {}).get("spec") or {}).get("replicas", 0)) if live_sts else 0
    scale = rolling.decide_scale(current, spec.replicas, None) if not live_sts else None
    drained: drain.Outcome | None = None
    if live_sts and (spec.replicas < current or old_status.get("scaleDown")):
        drained = drain.run_pass(kube, body, get_cluster, current, spec.replicas,
                                 old_status.get("scaleDown"),
                                 rate=SETTINGS.rebalance_throttle,
                                 batch_size=SETTINGS.rebalance_batch_size)
        scale = drained.scale
    replicas = scale.replicas if scale is not None else spec.replicas
    declared = spec  # JBOD: a leaving volume stays until its replicas moved off
    spec, removal, leaving = volume_removal.effective_spec(
        kube, names, spec, live_sts, bootstrap_for(names, spec), current, SETTINGS.kafka_timeout,
        SETTINGS.rebalance_batch_size, lambda: client_config(kube, names, declared))

    certs = cluster_ca.prepare(kube, body, names, spec, max(spec.replicas, current))
    etcd_trust = etcd_certs.ensure(kube, body, names, spec, certs)  # managed etcd TLS, when on
    digests = dataclasses.replace(secret_digests(kube, names, spec), etcd=etcd_trust)
    for obj in builders.owned(builders.build_all(names, spec, replicas, digests), body):
        if obj["kind"] == "StatefulSet":  # claim templates changed: orphan its pods
            volume_removal.recreate(kube, body, live_sts, obj)
        outcome = kube.apply(obj)
        if outcome != "unchanged":
            logger.info("%s %s/%s %s", obj["kind"], names.namespace,
                        obj["metadata"]["name"], outcome)

    selector = builders.selector_labels(names, "broker")
    pods = kube.list("Pod", names.namespace, selector)
    if spec.rack_topology_key:
        label_racks(kube, pods, spec.rack_topology_key)

    desired_hash = builders.config_hash(names, spec, digests.broker)
    decision = rolling.decide_roll([pod_view(p) for p in pods], desired_hash, replicas,
                                   lambda: get_cluster().health())
    if removal is not None and not removal.drained:  # no broker restarts with data left
        decision = dataclasses.replace(decision, delete=None)
    if decision.delete is not None:
        logger.info("rolling restart: deleting pod %s/%s", names.namespace, decision.delete)
        if kube.delete("Pod", names.namespace, decision.delete):
            POD_RESTARTS.inc()
            events.record(kube, body, events.NORMAL, conditions.ROLLING_RESTART,
                          f"restarting pod {decision.delete}: {decision.message}")
    if live_sts and replicas != current:
        events.record(kube, body, events.NORMAL, conditions.SCALING,
                      f"StatefulSet {names.stateful_set} scaled from {current} to {replicas} "
                      "brokers")

    resize = resize_claims(kube, names, spec, replicas, body)
    volume_removal.delete_claims(kube, names, declared, body)
    certificates = cluster_ca.finish(kube, body, names, spec, certs,
                                     decision.settled and decision.delete is None)

    ready_pods = sum(1 for p in pods if pod_view(p).ready)
    reason, message, ready = decision.reason, decision.message, decision.settled
    if scale is not None and scale.blocked:
        reason, message, ready = (drained.reason if drained else conditions.SCALE_DOWN_BLOCKED,
                                  scale.blocked, False)
    status = {
        "observedGeneration": generation,
        "replicas": len([p for p in pods if not pod_view(p).terminating]),
        "readyReplicas": ready_pods,
        "selector": builders.selector_string(selector),
        "bootstrapServers": names.bootstrap_servers(spec.bootstrap_listener.port),
        "adminUrl": (names.admin_url(https=bool(spec.security.admin_tls_secret))
                     if spec.admin_enabled else ""),
        "conditions": broker_conditions(
            ready, reason, message, scale, resize, spec, live_replicas=current,
            generation=generation, previous=previous, moving=bool(drained and drained.moving),
            blocked_reason=drained.reason if drained else conditions.SCALE_DOWN_BLOCKED),
    }
    if drained is not None or old_status.get("scaleDown"):  # a merge patch: null removes it
        status["scaleDown"] = drained.status if drained is not None else None
    volume_removal.report(status, removal, leaving, old_status, generation)
    if certificates is not None:
        status["certificates"] = certificates
    users = sync_users(kube, names, spec, get_cluster, old_status.get("users") or [],
                       generation)
    if users is not None:
        status["users"] = users
    shrunk = bool(live_sts) and replicas < current
    balancing = rebalance.run_pass(kube, body, spec, get_cluster, old_status.get("rebalance"),
                                   current if live_sts else 0, replicas, shrunk)
    if balancing is not None:  # the condition of a scale-down's moves stays when True
        status["rebalance"] = balancing
        status["conditions"] = [
            rebalance.condition(balancing, generation, previous)
            if c["type"] == conditions.REBALANCING and c["status"] != "True" else c
            for c in status["conditions"]]
    _write_status(kube, names, old_status, status, body)
    return status


def sync_users(kube: Kube, names: BrokerNames, spec: BrokerSpec,
               get_cluster: Callable[[], Cluster], previous: list[Obj],
               generation: int | None) -> list[Obj] | None:
    """Apply ``spec.users`` (``scram_users``); the new ``status.users`` (None: nothing to do)."""
    if not spec.users and not previous:
        return None
    inter_broker = (spec.security.inter_broker_username
                    if spec.inter_broker_listener.mechanism else None)
    secrets = {}
    for user in spec.users:
        obj = kube.read("Secret", names.namespace, user.password.name)
        secrets[user.key] = scram_users.read_secret(obj, user, _decoded(obj))
    entries: dict[scram_users.UserKey, Obj] = {}

    def report(key: scram_users.UserKey, ready: bool, reason: str, message: str,
               version: str | None) -> None:
        entries[key] = scram_users.user_status(key, ready, reason, message, version,
                                               generation, previous)

    def applied(key: scram_users.UserKey, change: Callable[[], None], reason: str) -> bool:
        """``change()``; on a Kafka failure, the user's status says so (``reason``)."""
        try:
            change()
        except KafkaOperationError as exc:
            report(key, False, reason, str(exc), scram_users.applied_version(key, previous))
            return False
        return True

    for user in spec.users:
        secret = secrets[user.key]
        if secret.password is None:
            report(user.key, False, scram_users.SECRET_NOT_FOUND, secret.problem,
                   scram_users.applied_version(user.key, previous))
    try:
        cluster = get_cluster()
        existing = cluster.scram_mechanisms(sorted({user.name for user in spec.users}))
    except KafkaOperationError as exc:
        for user in spec.users:
            if user.key not in entries:
                report(user.key, False, conditions.CLUSTER_UNREACHABLE, str(exc),
                       scram_users.applied_version(user.key, previous))
        for key in scram_users.removed(spec.users, previous, inter_broker):
            report(key, False, scram_users.DELETION_PENDING, str(exc),
                   scram_users.applied_version(key, previous))
        return list(entries.values())
    plan = scram_users.plan(spec.users, secrets, previous, existing, inter_broker)
    for key in plan.up_to_date:
        report(key, True, scram_users.CREDENTIAL_APPLIED, _applied_message(spec, key),
               scram_users.applied_version(key, previous))
    for upsert in plan.upserts:
        key = upsert.user.key
        if not applied(key, functools.partial(
                cluster.upsert_scram_credential, upsert.user.name, upsert.user.mechanism,
                upsert.password, scram_users.ITERATIONS), conditions.KAFKA_ERROR):
            continue
        logger.info("SCRAM user %s (%s) of Broker %s/%s set from its Secret", key[0], key[1],
                    names.namespace, names.name)
        report(key, True, scram_users.CREDENTIAL_APPLIED, _applied_message(spec, key),
               upsert.secret_version)
    for key in plan.deletions:
        if not applied(key, functools.partial(cluster.delete_scram_credential, *key),
                       scram_users.DELETION_PENDING):
            continue
        logger.info("SCRAM user %s (%s) of Broker %s/%s deleted", key[0], key[1],
                    names.namespace, names.name)
    order = [user.key for user in spec.users]
    return sorted(entries.values(), key=lambda e: (
        order.index(scram_users.entry_key(e)) if scram_users.entry_key(e) in order
        else len(order), scram_users.entry_key(e)))


def _applied_message(spec: BrokerSpec, key: scram_users.UserKey) -> str:
    user = next(u for u in spec.users if u.key == key)
    return f"credential set from Secret {user.password.name} (key {user.password.key})"


def resize_claims(kube: Kube, names: BrokerNames, spec: BrokerSpec, replicas: int,
                  body: Mapping[str, Any]) -> volumes.ResizePlan:
    """Raise each broker claim's request to its volume's size (``volumes.plan_resize``, per
    volume with JBOD); a claim asking for more than the spec is left alone (Kubernetes cannot
    shrink volumes). With a mix of ``deleteClaim`` volumes, their claims are owned by the
    Broker and deleted once their broker is scaled away (``jbod.claims_to_delete``)."""
    live = kube.list("PersistentVolumeClaim", names.namespace,
                     builders.selector_labels(names, "broker"))
    plan = volumes.ResizePlan()
    for volume in (v for v in spec.storage.volumes if not v.remove):  # leaving: not grown
        wanted = set(volumes.claim_names(names.stateful_set, replicas, volume.template))
        claims = [volumes.claim_view(pvc) for pvc in live
                  if (pvc.get("metadata") or {}).get("name") in wanted]
        part = volumes.plan_resize(claims, volume.size)
        for claim in part.patch:
            try:
                kube.patch("PersistentVolumeClaim", names.namespace, claim,
                           {"spec": {"resources": {"requests": {"storage": volume.size}}}})
            except ApiException as exc:  # e.g. a storage class without allowVolumeExpansion
                reason = exc.reason or ""
                with contextlib.suppress(ValueError, AttributeError):  # not a Status object
                    reason = json.loads(exc.body or "{}").get("message") or reason
                return dataclasses.replace(plan, refused=f"claim {claim}: {reason}")
        if part.patch:
            events.record(kube, body, events.NORMAL, conditions.RESIZING,
                          f"claims {', '.join(part.patch)} resized to {volume.size}")
        plan = volumes.ResizePlan(plan.patch + part.patch, plan.waiting + part.waiting,
                                  plan.larger + part.larger)
    _claims_retention(kube, names, spec, replicas, body, live)
    return plan


def _claims_retention(kube: Kube, names: BrokerNames, spec: BrokerSpec, replicas: int,
                      body: Mapping[str, Any], live: list[Obj]) -> None:
    if jbod.retention(spec.storage.volumes) == "Delete" or not any(
            v.delete_claim for v in spec.storage.volumes):
        return
    reference = builders.owner_reference(body)
    for pvc in live:
        name = pvc["metadata"]["name"]
        owner = jbod.claim_owner(spec.storage.volumes, names.stateful_set, name)
        if owner is not None and owner[0].delete_claim and \
                not pvc["metadata"].get("ownerReferences"):  # goes with the Broker
            kube.patch("PersistentVolumeClaim", names.namespace, name,
                       {"metadata": {"ownerReferences": [{**reference, "controller": False}]}})
    pods = {p["metadata"]["name"] for p in kube.list("Pod", names.namespace,
                                                     builders.selector_labels(names, "broker"))}
    for name, pod in jbod.claims_to_delete(spec.storage.volumes, names.stateful_set, replicas,
                                           [p["metadata"]["name"] for p in live]):
        if pod not in pods and kube.delete("PersistentVolumeClaim", names.namespace, name):
            events.record(kube, body, events.NORMAL, conditions.SCALING,
                          f"claim {name} deleted (deleteClaim) with its scaled-away broker")


def broker_conditions(ready: bool, reason: str, message: str,
                      scale: rolling.ScaleDecision | None, resize: volumes.ResizePlan,
                      spec: BrokerSpec, live_replicas: int, generation: int | None,
                      previous: Sequence[Mapping[str, Any]], *, moving: bool = False,
                      blocked_reason: str = conditions.SCALE_DOWN_BLOCKED) -> list[Obj]:
    """Ready, and one condition per concern (Reconciling, ScaleDownBlocked, StorageResizing,
    Rebalancing), each with observedGeneration. ``moving``: a drain batch is moving
    (``Rebalancing`` True); ``blocked_reason``: why the scale-down waits."""
    def make(kind: str, true: bool, why: str, text: str) -> Obj:
        return conditions.condition(kind, true, why, text, generation, previous)

    size = spec.storage.size if not spec.storage.jbod_volumes else ", ".join(
        f"volume {v.id} {v.size}" for v in spec.storage.jbod_volumes if not v.remove)
    blocked = scale is not None and bool(scale.blocked)
    if resize.refused:
        storage = make(conditions.STORAGE_RESIZING, False, conditions.EXPANSION_REFUSED,
                       f"storage.size {size} refused by the API server: "
                       f"{resize.refused}")
    elif resize.larger:
        storage = make(conditions.STORAGE_RESIZING, False, conditions.STORAGE_DECREASE,
                       f"storage.size {size} is smaller than claims "
                       f"{', '.join(resize.larger)}: Kubernetes cannot shrink a volume; "
                       "set storage.size back")
    elif resize.resizing:
        storage = make(conditions.STORAGE_RESIZING, True, conditions.RESIZING,
                       f"waiting for claims {', '.join(resize.waiting)} to reach "
                       f"{size}")
    else:
        storage = make(conditions.STORAGE_RESIZING, False, conditions.VOLUMES_AT_SIZE,
                       f"every broker claim has {size}")
    settled = ready and not resize.resizing and (scale is None or not scale.blocked)
    return [
        conditions.ready_condition(ready, reason, message, generation, previous),
        make(conditions.RECONCILING, not settled,
             conditions.RECONCILED if settled else reason if not ready else
             conditions.RESIZING,
             "nothing to do" if settled else message if not ready else storage["message"]),
        make(conditions.SCALE_DOWN_BLOCKED_TYPE, blocked,
             blocked_reason if blocked else conditions.RECONCILED,
             scale.blocked if blocked and scale is not None else
             f"{live_replicas} -> {spec.replicas} brokers: nothing holds the StatefulSet"),
        storage,
        make(conditions.REBALANCING, moving,
             conditions.REASSIGNING if moving else conditions.BALANCED,
             (scale.blocked if scale is not None else "") or "a drain batch still moving"
             if moving else "no reassignment in progress"),
    ]


def _write_status(kube: Kube, names: BrokerNames, old: Mapping[str, Any], new: Obj,
                  body: Mapping[str, Any] | None = None) -> None:
    if conditions.status_changed(old, new):
        kube.patch_status("Broker", names.namespace, names.name, new)
    if body is None:
        return
    before = {c.get("type"): c.get("reason") for c in old.get("conditions") or ()}
    for item in new.get("conditions") or ():
        failing = item["type"] == conditions.READY and item["status"] == "False" and \
            item["reason"] not in _TRANSIENT
        refused = item["reason"] in (conditions.STORAGE_DECREASE, conditions.INVALID_SPEC,
                                     conditions.EXPANSION_REFUSED)
        if (failing or refused) and before.get(item["type"]) != item["reason"]:
            events.record(kube, body, events.WARNING, item["reason"], item["message"])


# Ready reasons of a Broker on its normal way (a roll, a start): no Warning Event for them.
_TRANSIENT: Final = frozenset({conditions.CREATING, conditions.PODS_NOT_READY,
                               conditions.ROLLING_RESTART})
