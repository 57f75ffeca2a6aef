"""Authentication of admin API requests: ``Authorization: Bearer`` or ``Basic`` → a principal.

Owns ``AuthSettings`` (whether authentication is on, the credentials, how requests are
authorized) and ``authenticate``, which turns one request's ``Authorization`` header into a
Kafka principal (``User:<name>``) or a 401:

* authentication is off unless ``AdminSettings.auth`` is set (``--auth-file``): then every
  request gets the principal None and no check is made (the behaviour before security);
* with it on, a request without credentials is 401 ``AUTHENTICATION_REQUIRED`` and one with a
  wrong token, user or password 401 ``AUTHENTICATION_FAILED`` (never which part was wrong),
  both problem+json with one ``WWW-Authenticate`` challenge per configured scheme (RFC 9110
  §11.6.1; ``error="invalid_token"`` for a bad bearer token, RFC 6750 §3.1);
* ``/healthz``, ``/readyz`` and ``/metrics`` never authenticate: probes and scrapers carry no
  credentials (they reveal no data but liveness, reachability and request counters).

The security schemes are declared to FastAPI (``BEARER``, ``BASIC``) so the OpenAPI document
and Swagger UI's "Authorize" know them; the header itself is parsed here, so a malformed header
is answered like a wrong one.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from fastapi import Request
from fastapi.security import HTTPBasic, HTTPBearer

from strata.admin.credentials import AdminCredentials
from strata.admin.problems import ProblemError

REALM: Final = "strata-admin"


class AuthorizationMode(StrEnum):
    """``acl``: decide with the brokers' ACLs; ``none``: any authenticated caller may do all."""

    ACL = "acl"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """Authentication and authorization of the admin API (``AdminSettings.auth``).

    ``super_users`` and ``allow_everyone_if_no_acl_found`` are the brokers' ``super.users``
    and ``allow.everyone.if.no.acl.found``: give the admin service the same values, so a
    request is decided as the brokers would decide it. ``acl_cache_s`` bounds how stale the
    ACLs fetched from the brokers may be.
    """

    credentials: AdminCredentials
    authorization: AuthorizationMode = AuthorizationMode.ACL
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    acl_cache_s: float = 5.0


class _DocumentedBearer(HTTPBearer):
    """Declares the bearer scheme in OpenAPI; ``authenticate`` parses the header."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        return None


class _DocumentedBasic(HTTPBasic):
    """Declares the basic scheme in OpenAPI; ``authenticate`` parses the header."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        return None


BEARER: Final = _DocumentedBearer(
    auto_error=False, scheme_name="bearerToken",
    description="A token listed (as its SHA-256) in the admin credentials file; the principal "
                "is User:<username>.")
BASIC: Final = _DocumentedBasic(
    auto_error=False, scheme_name="basicAuth",
    description="A user of the admin credentials file (PBKDF2 hash); principal User:<username>.")


class AuthenticationError(ProblemError):
    """A 401 with the ``WWW-Authenticate`` challenges to send."""

    def __init__(self, title: str, detail: str, challenges: Sequence[str]) -> None:
        super().__init__(401, title, detail)
        self.challenges = list(challenges)


def challenges(credentials: AdminCredentials, invalid_token: bool = False) -> list[str]:
    out = []
    if credentials.tokens or not credentials.users:
        error = ', error="invalid_token"' if invalid_token else ""
        out.append(f'Bearer realm="{REALM}"{error}')
    if credentials.users:
        out.append(f'Basic realm="{REALM}", charset="UTF-8"')
    return out


def authenticate(settings: AuthSettings | None, header: str | None) -> str | None:
    """The principal of a request with this ``Authorization`` header; None when auth is off."""
    if settings is None:
        return None
    credentials = settings.credentials
    if not header or not header.strip():
        raise AuthenticationError("AUTHENTICATION_REQUIRED",
                                  "this API needs credentials: a bearer token or HTTP basic",
                                  challenges(credentials))
    scheme, _, param = header.strip().partition(" ")
    param = param.strip()
    principal: str | None = None
    if scheme.lower() == "bearer":
        principal = credentials.check_token(param) if param else None
        if principal is None:
            raise AuthenticationError("AUTHENTICATION_FAILED", "the bearer token is not valid",
                                      challenges(credentials, invalid_token=True))
        return principal
    if scheme.lower() == "basic":
        try:
            decoded = b64decode(param, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            decoded = ""
        username, separator, password = decoded.partition(":")
        if separator:
            principal = credentials.check_password(username, password)
        if principal is None:
            raise AuthenticationError("AUTHENTICATION_FAILED",
                                      "wrong user name or password", challenges(credentials))
        return principal
    raise AuthenticationError("AUTHENTICATION_REQUIRED",
                              f"the {scheme!r} authorization scheme is not supported",
                              challenges(credentials))
