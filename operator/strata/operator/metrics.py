"""Operator metrics, declared once (Strimzi's rule): reconciles, errors and durations per kind.

Served by ``prometheus_client`` on ``STRATA_OPERATOR_METRICS_PORT`` from the operator's
startup handler; kopf's own liveness endpoint (``--liveness``) is separate. Labelled series are
initialised at zero for both kinds so dashboards see them on a healthy operator.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from prometheus_client import Counter, Histogram

KINDS: Final = ("Broker", "Topic", "Rebalance")

RECONCILES: Final = Counter("strata_operator_reconciles_total",
                            "Reconciles run, per resource kind.", ["kind"])
ERRORS: Final = Counter("strata_operator_reconcile_errors_total",
                        "Reconciles that raised, per resource kind.", ["kind"])
DURATION: Final = Histogram("strata_operator_reconcile_duration_seconds",
                            "Time one reconcile took, per resource kind.", ["kind"])
POD_RESTARTS: Final = Counter("strata_operator_pod_restarts_total",
                              "Broker pods deleted by rolling restarts.")

for _kind in KINDS:
    RECONCILES.labels(_kind)
    ERRORS.labels(_kind)
    DURATION.labels(_kind)


@contextmanager
def measured(kind: str) -> Iterator[None]:
    """Count and time one reconcile of ``kind``; an exception counts as an error and goes on."""
    started = time.monotonic()
    RECONCILES.labels(kind).inc()
    try:
        yield
    except BaseException:
        ERRORS.labels(kind).inc()
        raise
    finally:
        DURATION.labels(kind).observe(time.monotonic() - started)
