"""What every console page shares: templates, the caller's session and rights, forms, errors.

* ``templates``: Jinja2 over ``templates/`` with autoescaping on for every template (record
  keys, values and headers are always shown as text), ``StrictUndefined`` so a misspelt name
  fails loudly in tests;
* ``ConsoleDep``: the request's ``Console``. Its session comes from the ``strata_console``
  cookie (``strata.admin.console.session``). With authentication on, a request without a live
  session raises ``LoginRequired`` (a 303 to ``/console/login?next=...``); with it off every
  visitor gets an anonymous session (principal None) so that forms still carry a CSRF token.
  Its ``access`` is the REST routes' own ``Access`` (``strata.admin.routers.access_of``): the
  console checks exactly the rights the REST route of the same action checks;
* ``Console.form()``: a POST's url-encoded fields (at most ``MAX_FORM_BYTES``), after the CSRF
  check (``strata.admin.console.csrf``);
* ``ConsoleRoute``: answers ``ProblemError`` (Kafka's error name and the REST route's status),
  a failed CSRF check (403 ``CSRF_TOKEN_INVALID``) and bad query parameters (422
  ``VALIDATION_ERROR``) with an HTML error page instead of problem+json, never a traceback.

The session cookie is HttpOnly, SameSite=Strict, path ``/console``, and Secure when the page was
served over HTTPS.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, overload
from urllib.parse import parse_qs, quote

import jinja2
from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from strata.admin.authorization import Access
from strata.admin.console import csrf, record_view
from strata.admin.console.session import COOKIE_NAME, Session, SessionStore
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.problems import ProblemError
from strata.admin.routers import access_of
from strata.security.acl import AclOperation, ResourceType

PREFIX: Final = "/console"
PACKAGE_DIR: Final = Path(__file__).parent
MAX_FORM_BYTES: Final = 1 << 20

environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(PACKAGE_DIR / "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
environment.globals["show"] = lambda data, view: record_view.show(data, record_view.View(view))
environment.filters["ms_time"] = record_view.ms_time
environment.filters["human_bytes"] = record_view.human_bytes
environment.filters["per_second"] = record_view.per_second
templates = Jinja2Templates(env=environment)


class LoginRequired(Exception):
    """No live session while authentication is on: send the browser to the login page."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def login_url(next_url: str) -> str:
    return f"{PREFIX}/login?next={quote(next_url, safe='/')}"


def safe_next(next_url: str | None) -> str:
    """Where to go after login: only a console path of this site (no open redirect)."""
    if next_url and next_url.startswith(PREFIX + "/") and not next_url.startswith("//") \
            and "\\" not in next_url and not next_url.startswith(f"{PREFIX}/login"):
        return next_url
    return PREFIX + "/"


def set_session_cookie(response: Response, request: Request, session: Session) -> None:
    response.set_cookie(COOKIE_NAME, session.id, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path=PREFIX)


def sessions(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.console_sessions
    return store


def auth_enabled(request: Request) -> bool:
    gateway: KafkaGateway = request.app.state.gateway
    return gateway.settings.auth is not None


def page(request: Request, template: str, values: dict[str, Any], status: int = 200,
         session: Session | None = None) -> HTMLResponse:
    """``template`` rendered with the values every page's layout needs."""
    context = {"principal": session.principal if session else None,
               "csrf_token": session.csrf_token if session else "",
               "logged_in": session is not None and auth_enabled(request),
               "prefix": PREFIX, **values}
    response: HTMLResponse = templates.TemplateResponse(request, template, context,
                                                        status_code=status)
    response.headers["Cache-Control"] = "no-store"
    return response


def error_page(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    session = sessions(request).get(request.cookies.get(COOKIE_NAME))
    return page(request, "error.html", {"status": status, "title": title, "detail": detail},
                status, session)


@dataclass(slots=True)
class Console:
    """One console request: its session, its rights and the service's Kafka gateway."""

    request: Request
    session: Session
    access: Access
    gateway: KafkaGateway
    new_session: bool = False

    async def allowed_names(self, operation: AclOperation, resource_type: ResourceType,
                            names: Iterable[str]) -> set[str]:
        """Those of ``names`` the caller may ``operation``: ``Access.allowed`` with the ACLs
        fetched once for the whole list, not once per name."""
        access = self.access
        if access.unrestricted:
            return set(names)
        assert access.cache is not None and access.principal is not None
        authorizer = await access.cache.authorizer()
        return {name for name in names
                if authorizer.authorize(access.principal, access.host, operation,
                                        resource_type, name)}

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        response = page(self.request, template, values, status, self.session)
        if self.new_session:
            set_session_cookie(response, self.request, self.session)
        return response

    def redirect(self, url: str) -> RedirectResponse:
        response = RedirectResponse(url, status_code=303)
        if self.new_session:
            set_session_cookie(response, self.request, self.session)
        return response

    async def form(self) -> dict[str, str]:
        """The POST's fields (the first value of each), once its CSRF token checks out."""
        body = await self.request.body()
        if len(body) > MAX_FORM_BYTES:
            raise ProblemError(413, "CONTENT_TOO_LARGE",
                               f"a console form may send at most {MAX_FORM_BYTES} bytes")
        fields = {key: values[0] for key, values in
                  parse_qs(body.decode("utf-8", errors="replace"),
                           keep_blank_values=True).items()}
        csrf.check(self.session.csrf_token, fields.get(csrf.FIELD))
        return fields


@overload
def int_field(fields: dict[str, str], name: str) -> int | None: ...


@overload
def int_field(fields: dict[str, str], name: str, default: int) -> int: ...


def int_field(fields: dict[str, str], name: str, default: int | None = None) -> int | None:
    """A form field as an int; empty or missing: ``default``; not a number: 422."""
    text = fields.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ProblemError(422, "VALIDATION_ERROR", f"{name}: {text!r} is not a whole number"
                           ) from None


def _console(request: Request) -> Console:
    gateway: KafkaGateway = request.app.state.gateway
    store = sessions(request)
    session = store.get(request.cookies.get(COOKIE_NAME))
    new = False
    if session is None:
        if gateway.settings.auth is not None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise LoginRequired(target if request.method == "GET" else PREFIX + "/")
        session, new = store.create(None), True
    return Console(request, session, access_of(request, session.principal), gateway, new)


ConsoleDep = Annotated[Console, Depends(_console)]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class ConsoleRoute(APIRoute):
    """A console route: errors become HTML pages (or the login redirect), not problem+json."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                return RedirectResponse(login_url(exc.next_url), status_code=303)
            except csrf.CsrfError as exc:
                return error_page(request, 403, "CSRF_TOKEN_INVALID", str(exc))
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ()))
                return error_page(request, 422, "VALIDATION_ERROR",
                                  f"{where}: {first.get('msg', 'invalid request')}")
            except ValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ()))
                return error_page(request, 422, "VALIDATION_ERROR",
                                  f"{where}: {first.get('msg', 'invalid form')}")
            except ProblemError as exc:
                return error_page(request, exc.status, exc.title, exc.detail)

        return guarded
