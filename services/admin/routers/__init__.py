"""The admin API's routers, one module per resource, and what they share.

``cluster`` (``/v1/cluster``), ``brokers`` (``/v1/brokers``), ``topics`` (``/v1/topics``),
``records`` (``/v1/topics/{name}/records``), ``groups`` (``/v1/groups``) and ``health``
(``/healthz``, ``/readyz``, ``/metrics`` at the root). Every router documents the problem+json
error answers in ``PROBLEMS`` so the OpenAPI document names every status the API can return.
``GatewayDep`` hands a route the application's ``KafkaGateway``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import Problem
from strata.admin.problems import PROBLEM_MEDIA_TYPE


def _gateway(request: Request) -> KafkaGateway:
    gateway: KafkaGateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[KafkaGateway, Depends(_gateway)]


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: _problem("The broker refused the request (INVALID_*, POLICY_VIOLATION, ...)."),
    404: _problem("No such topic, group, broker or route (UNKNOWN_TOPIC_OR_PARTITION, ...)."),
    409: _problem("Conflict (TOPIC_ALREADY_EXISTS, NON_EMPTY_GROUP)."),
    422: _problem("The request does not match its schema (VALIDATION_ERROR)."),
    502: _problem("A broker failed in a way that is not the caller's mistake."),
    503: _problem("No broker could be reached (CLUSTER_UNREACHABLE, NOT_CONTROLLER, ...)."),
    504: _problem("A broker did not answer in time (REQUEST_TIMED_OUT)."),
}
