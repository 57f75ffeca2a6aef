"""``/console/login`` and ``/console/logout``: a browser proves who it is once per session.

The login form takes what the admin service's authentication accepts
(``strata.admin.authentication``): a user name and password (checked as HTTP Basic would be)
or a bearer token. On success a new ``Session`` (``strata.admin.console.session``) is made for
the principal and its id set as the HttpOnly, SameSite=Strict cookie; a wrong login is 401 with
the same ``AUTHENTICATION_FAILED`` for every wrong part. The form itself is protected by a
double-submit cookie (``csrf.LOGIN_COOKIE``). After login the browser goes back to ``next`` if
it is a console path (``web.safe_next``), else to the overview. Logout (a POST with the
session's CSRF token) forgets the session. With authentication off there is nothing to log in
to: the login page redirects to the overview.
"""

from __future__ import annotations

from base64 import b64encode
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from strata.admin.authentication import AuthenticationError, authenticate
from strata.admin.console import csrf
from strata.admin.console.session import COOKIE_NAME
from strata.admin.console.web import (
    PREFIX,
    ConsoleDep,
    ConsoleRoute,
    auth_enabled,
    page,
    safe_next,
    sessions,
    set_session_cookie,
)
from strata.admin.kafka_gateway import KafkaGateway

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


def _login_page(request: Request, next_url: str, error: str | None = None,
                status: int = 200) -> Response:
    token = csrf.new_token()
    response = page(request, "login.html",
                    {"next": safe_next(next_url), "login_token": token, "error": error},
                    status)
    response.set_cookie(csrf.LOGIN_COOKIE, token, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path=PREFIX)
    return response


@router.get("/login")
async def login_form(request: Request, next: Annotated[str, Query()] = PREFIX + "/"
                     ) -> Response:
    if not auth_enabled(request):
        return RedirectResponse(safe_next(next), status_code=303)
    return _login_page(request, next)


@router.post("/login")
async def login(request: Request) -> Response:
    gateway: KafkaGateway = request.app.state.gateway
    settings = gateway.settings.auth
    body = (await request.body())[:65536].decode("utf-8", errors="replace")
    fields = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
    next_url = safe_next(fields.get("next"))
    if settings is None:
        return RedirectResponse(next_url, status_code=303)
    csrf.check(request.cookies.get(csrf.LOGIN_COOKIE), fields.get(csrf.FIELD))
    token = fields.get("token", "").strip()
    if token:
        header = f"Bearer {token}"
    else:
        pair = f"{fields.get('username', '')}:{fields.get('password', '')}"
        header = "Basic " + b64encode(pair.encode("utf-8")).decode("ascii")
    try:
        principal = authenticate(settings, header)
    except AuthenticationError:
        return _login_page(request, next_url, "AUTHENTICATION_FAILED: wrong user name, "
                                              "password or token", 401)
    session = sessions(request).create(principal)
    response = RedirectResponse(next_url, status_code=303)
    set_session_cookie(response, request, session)
    response.delete_cookie(csrf.LOGIN_COOKIE, path=PREFIX)
    return response


@router.post("/logout")
async def logout(console: ConsoleDep) -> Response:
    await console.form()
    sessions(console.request).delete(console.session.id)
    response = RedirectResponse(f"{PREFIX}/login" if auth_enabled(console.request)
                                else PREFIX + "/", status_code=303)
    response.delete_cookie(COOKIE_NAME, path=PREFIX)
    return response
