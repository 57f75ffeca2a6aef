"""kopf entry point: ``kopf run -A --standalone -m strata.operator.main``. Only registers
handlers; each delegates to the module named after the resource it reconciles.

Settings (``settings.py``) are read at import; the startup handler logs in with the official
``kubernetes`` client (in-cluster service account, else KUBECONFIG), starts the metrics
server, and keeps kopf's bookkeeping in annotations (``strata.dev/...``) rather than in
``status``: our status schema is strict and owned by the reconcile. kopf runs these sync
handlers in threads. Liveness is kopf's own endpoint (``--liveness=http://0.0.0.0:8080/healthz``).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import kopf
from prometheus_client import start_http_server

from strata.operator import broker, metrics, topic
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
    kube()
    if SETTINGS.metrics_port:
        start_http_server(SETTINGS.metrics_port)
    logger.info("strata operator started (reconcile every %.0fs)", SETTINGS.reconcile_interval)


# ------------------------------------------------------------------------------ Broker
@kopf.on.resume(GROUP, VERSION, "brokers")
@kopf.on.create(GROUP, VERSION, "brokers")
@kopf.on.update(GROUP, VERSION, "brokers", field="spec")
def broker_changed(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Broker"):
        broker.reconcile(body, kube())


@kopf.timer(GROUP, VERSION, "brokers", interval=SETTINGS.reconcile_interval,
            initial_delay=SETTINGS.reconcile_interval)
def broker_timer(body: kopf.Body, **_: Any) -> None:
    with metrics.measured("Broker"):
        broker.reconcile(body, kube())


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
