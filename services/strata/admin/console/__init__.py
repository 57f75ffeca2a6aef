"""The web console: the admin service's cluster, topics, records and groups in a browser.

Part of the admin service — same process, port, authentication and ACLs — under
``/console``: server-rendered Jinja2 pages (``templates/``, autoescaped) with a little vanilla
JavaScript and CSS (``static/``, served from the package; no CDN, no build step). Each page
module renders the REST route of the same action and checks the same rights:

* ``login``: the login form (token or user and password) and logout;
* ``overview``: brokers, controller, partitions and leaders per broker, under-replicated and
  offline partitions;
* ``brokers``: one broker's charts, log dirs and configs (view, set, reset);
* ``reassignments``: moving a partition's replicas, the moves in progress, cancelling one,
  and preferred-leader election;
* ``topics``: list, search, create; a topic's partitions and configs; delete;
* ``records``: the record browser (seek, filter, text/JSON/hex) and the produce form;
* ``groups``: consumer groups, lag and its chart, reset offsets with a dry-run preview, delete;
* ``transactions``: transactions, one id's state, aborting a hanging one;
* ``acls``, ``users``, ``quotas``: the security pages — ACLs, SCRAM users and client quotas
  (list, create, delete);
* ``charts``: the sampled series as JSON for the pages' charts (``sampler`` samples the
  brokers' own ``/metrics`` and log dirs into the pure ``series`` rings).

``web`` holds what they share (sessions, rights, CSRF-checked forms, HTML error pages);
``session``, ``csrf`` and ``record_view`` are pure and unit-tested. ``install`` adds it all to
an application (``strata.admin.app.create_app``, which stops the sampler and closes the
record reader's consumer at shutdown with ``shutdown``); ``settings`` holds the console's own
settings (the Grafana URL, the sampling interval).
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from strata.admin.console import (
    acls,
    brokers,
    charts,
    groups,
    login,
    overview,
    quotas,
    reassignments,
    records,
    topics,
    transactions,
    users,
)
from strata.admin.console.record_reader import RecordReader
from strata.admin.console.sampler import MetricsSampler
from strata.admin.console.session import SessionStore
from strata.admin.console.settings import ConsoleSettings
from strata.admin.console.web import PACKAGE_DIR, PREFIX


def install(app: FastAPI, sessions: SessionStore | None = None,
            settings: ConsoleSettings | None = None) -> None:
    """Serve the console under ``/console`` of ``app`` (settings: from the environment)."""
    settings = settings if settings is not None else ConsoleSettings.from_env(os.environ)
    app.state.console_settings = settings
    app.state.console_sessions = sessions if sessions is not None else SessionStore()
    app.state.console_reader = RecordReader(app.state.gateway)
    app.state.console_sampler = MetricsSampler(app.state.gateway,
                                               interval_s=settings.sample_interval_s)
    for module in (login, overview, brokers, reassignments, topics, records, groups,
                   transactions, acls, users, quotas, charts):
        app.include_router(module.router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=PACKAGE_DIR / "static"),
              name="console-static")

    @app.get(PREFIX, include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)


async def shutdown(app: FastAPI) -> None:
    """Stop the metrics sampler, then close the record reader's consumer (on a worker)."""
    sampler: MetricsSampler = app.state.console_sampler
    await sampler.stop()
    await app.state.gateway.run(close, app)


def close(app: FastAPI) -> None:
    """Close the console's record reader (its consumer); blocking: call it on a worker."""
    reader: RecordReader = app.state.console_reader
    reader.close()
