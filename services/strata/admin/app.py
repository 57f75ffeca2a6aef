"""``create_app``: the admin service's FastAPI application, ready for uvicorn.

Owns the wiring only: the ``KafkaGateway`` (made at startup, its producer flushed at shutdown
by the lifespan), the routers (``strata.admin.routers``), problem+json for every error
(``strata.admin.problems``), the web console under ``/console``
(``strata.admin.console``), the metrics middleware, and with ``settings.auth`` the cache of
the brokers' ACLs that requests are authorized with (``strata.admin.authorization``). OpenAPI
at ``/openapi.json``, Swagger UI at ``/docs``. One application per ``AdminSettings``; tests
make as many as they like.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from strata.admin import console, problems
from strata.admin.authorization import AclCache, describe_acls
from strata.admin.kafka_gateway import AdminSettings, KafkaGateway
from strata.admin.metrics import AdminMetrics, MetricsMiddleware
from strata.admin.routers import (
    brokers,
    cluster,
    groups,
    health,
    quotas,
    records,
    topics,
    transactions,
)

API_VERSION = "1"


def create_app(settings: AdminSettings) -> FastAPI:
    gateway = KafkaGateway(settings)
    admin_metrics = AdminMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await console.shutdown(app)
            await gateway.run(gateway.close)

    app = FastAPI(
        title="Strata admin API",
        version=API_VERSION,
        description="Cluster, brokers, topics, records, consumer groups, quotas and "
                    "transactions of a Strata "
                    "(Kafka-compatible) cluster, over the Kafka protocol. Errors are RFC 9457 "
                    "problem details titled with Kafka's error name.",
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.acl_cache = (AclCache(lambda: gateway.run(describe_acls, gateway), settings.auth)
                           if settings.auth is not None else None)
    app.state.metrics = admin_metrics
    problems.install(app)
    for module in (health, cluster, brokers, topics, records, groups, quotas, transactions):
        app.include_router(module.router)
    console.install(app)
    app.add_middleware(MetricsMiddleware, metrics=admin_metrics)
    return app

