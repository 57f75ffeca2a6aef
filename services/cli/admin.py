"""``strata admin``: run the REST admin service (``strata.admin``) in the foreground.

``strata admin --bootstrap-servers HOST:PORT[,...] [--host 127.0.0.1] [--port 8080]``; the
bootstrap address also comes from ``$STRATA_BOOTSTRAP_SERVERS``. Serves until SIGINT/SIGTERM
(uvicorn's graceful shutdown), exit 0. ``/readyz`` answers 200 once a broker answers, so a
launcher (``strata dev``) starts it, then polls ``/readyz``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from strata.cli.kafka_client import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP


def admin(
    bootstrap_servers: Annotated[
        str, typer.Option("--bootstrap-servers", "-b", envvar=BOOTSTRAP_ENV,
                          metavar="HOST:PORT,...",
                          help="Brokers to bootstrap from (default $STRATA_BOOTSTRAP_SERVERS "
                               "or 127.0.0.1:9092).")
    ] = DEFAULT_BOOTSTRAP,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535,
                                      help="HTTP port (REST, /docs, /metrics).")] = 8080,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, metavar="SECONDS",
                                           help="Longest wait for one Kafka request.")
                       ] = 10.0,
    log_level: Annotated[str, typer.Option("--log-level",
                                           help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the REST admin service (OpenAPI at /docs) until SIGTERM or SIGINT."""
    from strata.admin.kafka_gateway import AdminSettings
    from strata.admin.server import run

    raise typer.Exit(run(AdminSettings(bootstrap_servers, timeout), host, port,
                         log_level.lower()))
