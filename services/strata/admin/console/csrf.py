"""CSRF protection of the console's forms: a session-bound synchronizer token.

Every page rendered for a session puts the session's ``csrf_token`` in a hidden
``csrf_token`` field of each form; every POST must send it back, compared in constant time
(``hmac.compare_digest``). A cross-site page can make a browser POST, but cannot read the token
(same-origin policy), and the session cookie is ``SameSite=Strict`` besides.

The login form has no session yet: it is protected with a double-submit cookie
(``LOGIN_COOKIE``: a random value set when the login page is served, echoed in the form; a
cross-site page can neither read nor set it), so nobody can log a browser in as someone else.

Pure functions: no I/O; the routes raise ``CsrfError`` (answered 403) when ``valid`` is False.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final

FIELD: Final = "csrf_token"
LOGIN_COOKIE: Final = "strata_console_login"


class CsrfError(Exception):
    """A POST without the right CSRF token (answered 403 CSRF_TOKEN_INVALID)."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def valid(expected: str | None, submitted: str | None) -> bool:
    """Whether ``submitted`` is the token ``expected`` (both non-empty), in constant time."""
    if not expected or not submitted:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), submitted.encode("utf-8"))


def check(expected: str | None, submitted: str | None) -> None:
    if not valid(expected, submitted):
        raise CsrfError("the form's CSRF token is missing or does not match this session; "
                        "reload the page and try again")
