"""The admin service's own metrics (``GET /metrics``), on a registry of its own.

* ``strata_admin_requests_total{method, route, status}``: requests answered, by route template
  (``/v1/topics/{name}``, never the raw path, so series stay few; FastAPI's own pages
  by their fixed path);
* ``strata_admin_request_latency_seconds{method, route}``: time to answer;
* ``strata_admin_kafka_unreachable_total``: readiness checks that found no broker.

``MetricsMiddleware`` is a plain ASGI middleware (no per-request objects of its own
beyond the timer); requests that match no route (404) count under ``route="unmatched"``.
"""

from __future__ import annotations

import time
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class AdminMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("strata_admin_requests", "HTTP requests answered.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("strata_admin_request_latency_seconds",
                                 "Time to answer an HTTP request.", ["method", "route"],
                                 buckets=BUCKETS, registry=self.registry)
        self.unreachable = Counter("strata_admin_kafka_unreachable",
                                   "Readiness checks that reached no broker.",
                                   registry=self.registry)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """ASGI middleware counting and timing every HTTP request into ``AdminMetrics``."""

    def __init__(self, app: ASGIApp, metrics: AdminMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            route: Any = scope.get("route")
            template = getattr(route, "path", None)
            if template is None:  # FastAPI's own pages (/openapi.json, /docs) or no route
                template = "unmatched" if status[0] == 404 else str(scope.get("path", ""))
            method = str(scope.get("method", ""))
            self._metrics.requests.labels(method, template, str(status[0])).inc()
            self._metrics.latency.labels(method, template).observe(
                time.perf_counter() - started)
