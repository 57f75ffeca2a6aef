"""The admin API's routers, one module per resource, and what they share.

``cluster`` (``/v1/cluster``), ``brokers`` (``/v1/brokers``), ``topics`` (``/v1/topics``),
``records`` (``/v1/topics/{name}/records``), ``groups`` (``/v1/groups``), ``quotas``
(``/v1/quotas``), ``transactions`` (``/v1/transactions``) and ``health``
(``/healthz``, ``/readyz``, ``/metrics`` at the root). Every router documents the problem+json
error answers in ``PROBLEMS`` so the OpenAPI document names every status the API can return.
``GatewayDep`` hands a route the application's ``KafkaGateway``; ``AccessDep`` authenticates
the request (401, ``strata.admin.authentication``) and hands the route its ``Access`` to check
the caller's rights with (403, ``strata.admin.authorization``). Every ``/v1`` route takes
``AccessDep``; the health routes do not.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Security

from strata.admin.authentication import BASIC, BEARER, AuthorizationMode, authenticate
from strata.admin.authorization import Access
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import Problem
from strata.admin.problems import PROBLEM_MEDIA_TYPE


def _gateway(request: Request) -> KafkaGateway:
    gateway: KafkaGateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[KafkaGateway, Depends(_gateway)]


def _access(request: Request, _bearer: Annotated[None, Security(BEARER)],
            _basic: Annotated[None, Security(BASIC)]) -> Access:
    gateway: KafkaGateway = request.app.state.gateway
    principal = authenticate(gateway.settings.auth, request.headers.get("Authorization"))
    return access_of(request, principal)


def access_of(request: Request, principal: str | None) -> Access:
    """The ``Access`` of an authenticated ``principal`` calling from ``request``'s address
    (shared with the web console, whose principal comes from its login session)."""
    gateway: KafkaGateway = request.app.state.gateway
    settings = gateway.settings.auth
    if settings is None:
        return Access(principal, "*")
    host = request.client.host if request.client is not None else "*"
    mode = settings.authorization
    return Access(principal, host, mode,
                  request.app.state.acl_cache if mode is AuthorizationMode.ACL else None)


AccessDep = Annotated[Access, Depends(_access)]


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: _problem("The broker refused the request (INVALID_*, POLICY_VIOLATION, ...)."),
    401: _problem("Credentials missing or wrong (AUTHENTICATION_REQUIRED, "
                  "AUTHENTICATION_FAILED); only when authentication is on."),
    403: _problem("The brokers' ACLs do not allow the caller this operation "
                  "(TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, "
                  "CLUSTER_AUTHORIZATION_FAILED)."),
    404: _problem("No such topic, group, broker or route (UNKNOWN_TOPIC_OR_PARTITION, ...)."),
    409: _problem("Conflict (TOPIC_ALREADY_EXISTS, NON_EMPTY_GROUP)."),
    422: _problem("The request does not match its schema (VALIDATION_ERROR)."),
    502: _problem("A broker failed in a way that is not the caller's mistake."),
    503: _problem("No broker could be reached (CLUSTER_UNREACHABLE, NOT_CONTROLLER, ...)."),
    504: _problem("A broker did not answer in time (REQUEST_TIMED_OUT)."),
}
