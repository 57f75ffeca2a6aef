"""Errors as RFC 9457 problem details (``application/problem+json``) carrying Kafka's error name.

Owns the error contract of the admin API:

* ``ProblemError``: raised anywhere in a request; answered as ``{type, title, status, detail}``
  where ``title`` is Kafka's error name when a broker (or librdkafka) gave one
  (``TOPIC_ALREADY_EXISTS``), else a short name of ours (``VALIDATION_ERROR``, ``NOT_FOUND``);
* ``status_for``: Kafka error name → HTTP status. Mistakes of the caller are 4xx, never 5xx:
  conflicts 409, unknown things 404, ``INVALID_*`` / policy / config errors 400, Kafka's
  ``*_AUTHORIZATION_FAILED`` 403 (ours, ``strata.admin.authorization``, or a broker's). Only the
  cluster being unreachable or timing out is 503 / 504, and an error we cannot classify 502
  (the broker failed, not the caller);
* ``install``: handlers that turn ``ProblemError``, request validation errors (422) and
  Starlette's own HTTP errors (404 no route, 405) into problem+json, so every error of the API
  has one shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_MEDIA_TYPE: Final = "application/problem+json"
TYPE_PREFIX: Final = "https://strata.dev/problems/"

# Kafka's names (strata.protocol.error_codes) and librdkafka's abbreviations of some of them.
_CONFLICT: Final = frozenset({
    "TOPIC_ALREADY_EXISTS", "NON_EMPTY_GROUP", "CONCURRENT_TRANSACTIONS",
    "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION",
})
_NOT_FOUND: Final = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID",
    "GROUP_ID_NOT_FOUND", "BROKER_NOT_FOUND", "RESOURCE_NOT_FOUND", "NOT_FOUND",
    "TRANSACTIONAL_ID_NOT_FOUND",
})
_BAD_REQUEST: Final = frozenset({
    "POLICY_VIOLATION", "UNSUPPORTED_VERSION", "MESSAGE_TOO_LARGE", "MSG_SIZE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE", "UNKNOWN_CONFIG", "OFFSET_OUT_OF_RANGE",
    "TOPIC_DELETION_DISABLED", "INVALID_ARG",
    "UNSUPPORTED_FEATURE", "NOT_IMPLEMENTED",
})
_UNAVAILABLE: Final = frozenset({
    "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "BROKER_NOT_AVAILABLE", "NOT_CONTROLLER",
    "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION",
    "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "KAFKA_STORAGE_ERROR",
    "CLUSTER_UNREACHABLE", "_QUEUE_FULL",
})
_TIMEOUT: Final = frozenset({"_TIMED_OUT", "REQUEST_TIMED_OUT", "_MSG_TIMED_OUT", "TIMED_OUT"})


def status_for(name: str) -> int:
    """The HTTP status of a Kafka (or librdkafka) error name."""
    if name.endswith("_AUTHORIZATION_FAILED"):
        return 403
    if name in _CONFLICT:
        return 409
    if name in _NOT_FOUND:
        return 404
    if name.startswith("INVALID_") or name in _BAD_REQUEST or name.startswith("_INVALID"):
        return 400
    if name in _UNAVAILABLE:
        return 503
    if name in _TIMEOUT:
        return 504
    return 502


class ProblemError(Exception):
    """An error answered as problem+json; ``title`` is Kafka's error name where there is one."""

    def __init__(self, status: int, title: str, detail: str,
                 errors: Sequence[dict[str, Any]] | None = None) -> None:
        super().__init__(f"{title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = list(errors) if errors is not None else None

    @classmethod
    def kafka(cls, name: str, detail: str) -> ProblemError:
        """A broker or client error by its Kafka name, with the status ``status_for`` gives."""
        return cls(status_for(name), name, detail)


def problem_response(status: int, title: str, detail: str, instance: str | None = None,
                     errors: Sequence[dict[str, Any]] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"type": TYPE_PREFIX + title.lower().replace("_", "-").strip("-"),
                            "title": title, "status": status, "detail": detail}
    if instance is not None:
        body["instance"] = instance
    if errors is not None:
        body["errors"] = jsonable_encoder(errors)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE)


_HTTP_TITLES: Final = {401: "AUTHENTICATION_REQUIRED", 403: "FORBIDDEN", 404: "NOT_FOUND",
                       405: "METHOD_NOT_ALLOWED", 400: "BAD_REQUEST",
                       413: "CONTENT_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE"}


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` with problem+json."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ProblemError)
        response = problem_response(exc.status, exc.title, exc.detail, request.url.path,
                                    exc.errors)
        for challenge in getattr(exc, "challenges", ()):  # 401: one WWW-Authenticate each
            response.headers.append("WWW-Authenticate", challenge)
        return response

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"])
        return problem_response(422, "VALIDATION_ERROR", f"{where}: {first['msg']}",
                                request.url.path, errors)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        title = _HTTP_TITLES.get(exc.status_code, f"HTTP_{exc.status_code}")
        response = problem_response(exc.status_code, title, str(exc.detail), request.url.path)
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    app.add_exception_handler(ProblemError, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
