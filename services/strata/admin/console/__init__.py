"""The web console: the admin service's cluster, topics, records and groups in a browser.

Part of the admin service — same process, port, authentication and ACLs — under
``/console``: server-rendered Jinja2 pages (``templates/``, autoescaped) with a little vanilla
JavaScript and CSS (``static/``, served from the package; no CDN, no build step). Each page
module renders the REST route of the same action and checks the same rights:

* ``login``: the login form (token or user and password) and logout;
* ``overview``: brokers, controller, partitions and leaders per broker, under-replicated and
  offline partitions;
* ``topics``: list, search, create; a topic's partitions and configs; delete;
* ``records``: the record browser (seek, filter, text/JSON/hex) and the produce form;
* ``groups``: consumer groups, lag, reset offsets with a dry-run preview.

``web`` holds what they share (sessions, rights, CSRF-checked forms, HTML error pages);
``session``, ``csrf`` and ``record_view`` are pure and unit-tested. ``install`` adds it all to
an application (``strata.admin.app.create_app``, which closes the record reader's consumer
at shutdown with ``close``).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from strata.admin.console import groups, login, overview, records, topics, transactions
from strata.admin.console.record_reader import RecordReader
from strata.admin.console.session import SessionStore
from strata.admin.console.web import PACKAGE_DIR, PREFIX


def install(app: FastAPI, sessions: SessionStore | None = None) -> None:
    """Serve the console under ``/console`` of ``app``."""
    app.state.console_sessions = sessions if sessions is not None else SessionStore()
    app.state.console_reader = RecordReader(app.state.gateway)
    for module in (login, overview, topics, records, groups, transactions):
        app.include_router(module.router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=PACKAGE_DIR / "static"),
              name="console-static")

    @app.get(PREFIX, include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)


def close(app: FastAPI) -> None:
    """Close the console's record reader (its consumer); blocking: call it on a worker."""
    reader: RecordReader = app.state.console_reader
    reader.close()
