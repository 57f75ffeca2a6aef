"""kopf entry point: ``kopf run -A --standalone -m strata.operator.main``. Only registers
handlers; each delegates to the module named after the resource it reconciles.

Brokers carry no finalizer (deleting one never waits for the operator); their periodic pass
is our own loop (``resync_brokers``), which stands by, like kopf's handlers, while a peer of
higher priority is alive (``leadership.py``; kopf peering, several replicas). Topics and Users carry
kopf's finalizer: their deletion handlers delete the Kafka topic (the user's credentials, ACLs
and quotas), and their timers revert changes made in the cluster. Rebalances carry it too: a
deleted one stops after its batch in flight and clears its throttles; their timer advances
the run one step per pass and is what sees the approve annotation (an update handler cannot:
kopf leaves annotations under its storage prefix, ``strata.dev/``, out of the diff).

Settings (``settings.py``) are read at import; the startup handler logs in with the official
``kubernetes`` client (in-cluster service account, else KUBECONFIG), starts the metrics
server, draws the kopf peering priority (with ``--peering`` the replica of highest priority
works and the others stand by; equal priorities would all work, so each draws its own), and
keeps kopf's bookkeeping in annotations (``strata.dev/...``) rather than in
``status``: our status schema is strict and owned by the reconcile. kopf runs these sync
handlers in threads. Liveness is kopf's own endpoint (``--liveness=http://0.0.0.0:8080/healthz``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
import threading
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from prometheus_client import start_http_server

from strata.operator import broker, leadership, metrics, rebalance_handler, topic, user
from strata.operator.kube import Kube, load_config
from strata.operator.model import GROUP, VERSION
from strata.operator.settings import SETTINGS

logger = logging.getLogger(__name__)
_kube: Kube | None = None


def kube() -> Kube:
    global _kube
    if _kube is None:
        _kube = Kube(load_config())
    return _kube


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    # Several replicas (kopf peering, ``--peering``): the highest priority works, the others
    # stand by; replicas of one Deployment are alike, so each draws its own priority.
    if not settings.peering.priority:  # kopf's --priority wins, then our setting
        settings.peering.priority = (SETTINGS.peering_priority
                                     or secrets.randbelow(2**31 - 1) + 1)
    _peering.update(standalone=settings.peering.standalone, name=settings.peering.name,
                    clusterwide=settings.peering.clusterwide,
                    priority=settings.peering.priority)
    kube()
    if SETTINGS.metrics_port:
        start_http_server(SETTINGS.metrics_port)
    logger.info("strata operator started (reconcile every %.0fs)", SETTINGS.reconcile_interval)


# ------------------------------------------------------------------------------ Broker
# No kopf timer for Brokers: kopf puts a finalizer on every object a timer or daemon watches,
# and a finalizer on a Broker would block its deletion whenever the operator is not running
# (Strimzi's stuck namespaces). Brokers get no finalizer at all; the periodic pass (drift
# repair, rolling restarts, scale-down) is our own loop over the Brokers kopf has seen.
_brokers: dict[tuple[str, str], None] = {}
_brokers_lock = threading.Lock()
_peering: dict[str, Any] = {"standalone": True}


def standing_by(namespace: str) -> bool:
    """Whether a peer of higher priority works for ``namespace`` (kopf peering: kopf pauses
    its own handlers then, and our loop must pause too; ``leadership.py``)."""
    if _peering.get("standalone", True):
        return False
    try:
        if _peering["clusterwide"]:
            peering = kube().read("ClusterKopfPeering", None, _peering["name"])
        else:
            peering = kube().read("KopfPeering", namespace, _peering["name"])
    except ApiException as exc:  # kopf, reading the same object, fails loudly meanwhile
        logger.warning("cannot read the peering object %s: %s", _peering["name"], exc)
        return False
    return leadership.outranked((peering or {}).get("status"), int(_peering["priority"]),
                                datetime.datetime.now(tz=datetime.UTC))


@kopf.on.resume(GROUP, VERSION, "brokers")
@kopf.on.create(GROUP, VERSION, "brokers")
@kopf.on.update(GROUP, VERSION, "brokers", field="spec")
def broker_changed(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Broker"):
        broker.reconcile(body, kube())


@kopf.on.event(GROUP, VERSION, "brokers")
def broker_seen(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    key = (str(body.metadata.namespace), str(body.metadata.name))
    with _brokers_lock:
        if event.get("type") == "DELETED":
            _brokers.pop(key, None)
        else:
            _brokers[key] = None


def resync_brokers() -> None:
    """One periodic pass over every known Broker, read fresh (a thread: the client is sync)."""
    with _brokers_lock:
        keys = list(_brokers)
    paused: dict[str, bool] = {}
    for namespace, name in keys:
        if namespace not in paused:
            paused[namespace] = standing_by(namespace)
        if paused[namespace]:
            continue
        body = kube().read("Broker", namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            continue
        try:
            with metrics.measured("Broker"):
                broker.reconcile(body, kube())
        except Exception:  # one Broker's failure must not stop the others' passes
            logger.exception("periodic reconcile of Broker %s/%s failed", namespace, name)


async def _resync_loop() -> None:
    while True:
        await asyncio.sleep(SETTINGS.reconcile_interval)
        await asyncio.to_thread(resync_brokers)


@kopf.on.startup()
async def start_resync(memo: kopf.Memo, **_: Any) -> None:
    memo.resync = asyncio.create_task(_resync_loop(), name="strata-broker-resync")


@kopf.on.cleanup()
async def stop_resync(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("resync")
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# ------------------------------------------------------------------------------ Topic
@kopf.on.resume(GROUP, VERSION, "topics")
@kopf.on.create(GROUP, VERSION, "topics")
@kopf.on.update(GROUP, VERSION, "topics", field="spec")
def topic_changed(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Topic"):
        topic.reconcile(body, kube())


@kopf.timer(GROUP, VERSION, "topics", interval=SETTINGS.reconcile_interval,
            initial_delay=SETTINGS.reconcile_interval)
def topic_timer(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Topic"):
        topic.reconcile(body, kube())


@kopf.on.delete(GROUP, VERSION, "topics")
def topic_deleted(body: kopf.Body, runtime: datetime.timedelta, **_: Any) -> None:
    with metrics.measured("Topic"):
        logger.info("%s", topic.delete(body, kube(), runtime.total_seconds()))


# ------------------------------------------------------------------------------ User
@kopf.on.resume(GROUP, VERSION, "users")
@kopf.on.create(GROUP, VERSION, "users")
@kopf.on.update(GROUP, VERSION, "users", field="spec")
def user_changed(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("User"):
        user.reconcile(body, kube())


@kopf.timer(GROUP, VERSION, "users", interval=SETTINGS.reconcile_interval,
            initial_delay=SETTINGS.reconcile_interval)
def user_timer(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("User"):
        user.reconcile(body, kube())


@kopf.on.delete(GROUP, VERSION, "users")
def user_deleted(body: kopf.Body, runtime: datetime.timedelta, **_: Any) -> None:
    with metrics.measured("User"):
        logger.info("%s", user.delete(body, kube(), runtime.total_seconds()))


# ------------------------------------------------------------------------------ Rebalance
@kopf.on.resume(GROUP, VERSION, "rebalances")
@kopf.on.create(GROUP, VERSION, "rebalances")
@kopf.on.update(GROUP, VERSION, "rebalances", field="spec")
def rebalance_changed(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Rebalance"):
        rebalance_handler.reconcile(body, kube())


@kopf.timer(GROUP, VERSION, "rebalances", interval=SETTINGS.reconcile_interval,
            initial_delay=SETTINGS.reconcile_interval)
def rebalance_timer(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Rebalance"):
        rebalance_handler.reconcile(body, kube())


@kopf.on.delete(GROUP, VERSION, "rebalances")
def rebalance_deleted(body: kopf.Body, runtime: datetime.timedelta, **_: Any) -> None:
    with metrics.measured("Rebalance"):
        logger.info("%s", rebalance_handler.delete(body, kube(), runtime.total_seconds()))
