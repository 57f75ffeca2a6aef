"""``/healthz``, ``/readyz`` and ``/metrics`` at the root (no ``/v1``: probes and scrapers).

* ``/healthz``: 200 while the process serves HTTP (liveness);
* ``/readyz``: 200 only when a broker answered a Metadata request within ``READY_TIMEOUT_S``,
  else 503 (problem+json naming the bootstrap address) — what ``strata dev`` waits for;
* ``/metrics``: the service's own Prometheus metrics (``strata.admin.metrics``).
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Request, Response

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.metrics import CONTENT_TYPE, AdminMetrics
from strata.admin.models import Health
from strata.admin.problems import ProblemError
from strata.admin.routers import PROBLEMS, GatewayDep
from strata.client.kafka_errors import KafkaClientError

router = APIRouter(tags=["health"])
READY_TIMEOUT_S: Final = 2.0


def _reachable(gateway: KafkaGateway) -> None:
    try:
        gateway.kafka.metadata(min(READY_TIMEOUT_S, gateway.settings.timeout_s))
    except KafkaClientError as exc:  # whatever the error: not ready
        raise ProblemError(503, "CLUSTER_UNREACHABLE",
                           gateway.unreachable_detail(exc)) from None


@router.get("/healthz", summary="Liveness")
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", summary="Readiness: a broker answers", responses={503: PROBLEMS[503]})
async def readyz(gateway: GatewayDep, request: Request) -> Health:
    try:
        await gateway.run(_reachable, gateway)
    except ProblemError:
        metrics: AdminMetrics = request.app.state.metrics
        metrics.unreachable.inc()
        raise
    return Health(status="ok")


@router.get("/metrics", summary="The admin service's Prometheus metrics",
            response_class=Response,
            responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}})
async def metrics(request: Request) -> Response:
    registry: AdminMetrics = request.app.state.metrics
    return Response(registry.exposition(), media_type=CONTENT_TYPE)
