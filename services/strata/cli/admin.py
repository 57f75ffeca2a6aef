"""``strata admin``: run the REST admin service (``strata.admin``) in the foreground.

``strata admin --bootstrap-servers HOST:PORT[,...] [--host 127.0.0.1] [--port 8080]``; the
bootstrap address also comes from ``$STRATA_BOOTSTRAP_SERVERS``. Serves until SIGINT/SIGTERM
(uvicorn's graceful shutdown), exit 0. ``/readyz`` answers 200 once a broker answers, so a
launcher (``strata dev``) starts it, then polls ``/readyz``.

Security (all off by default; each option also reads the environment variable shown):

* ``--auth-file`` (``STRATA_ADMIN_AUTH_FILE``): the credentials file (``strata.admin.credentials``:
  bearer tokens and basic users, hashed); with it every ``/v1`` request must authenticate.
  ``--authorization acl`` (default) decides with the brokers' ACLs; give the brokers' own
  ``--super-users`` (``User:a;User:b``) and ``--allow-everyone-if-no-acl-found``;
* ``--ssl-certfile``/``--ssl-keyfile`` serve HTTPS; ``--ssl-ca-certs`` with
  ``--ssl-client-auth optional|required`` asks for client certificates;
* the service's own Kafka clients: ``--client-properties FILE`` (librdkafka ``key=value`` lines:
  ``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
  ``ssl.ca.location``...) and ``STRATA_ADMIN_KAFKA_<KEY>`` variables, which win
  (``STRATA_ADMIN_KAFKA_SASL_PASSWORD`` -> ``sasl.password``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from strata.cli.errors import reported_errors, usage_error
from strata.cli.kafka_client import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP

if TYPE_CHECKING:
    from strata.admin.kafka_gateway import AdminSettings
    from strata.admin.server import ServerTls

_FILE = {"exists": True, "dir_okay": False, "readable": True}


def admin(
    ctx: typer.Context,
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
    auth_file: Annotated[Path | None, typer.Option(
        "--auth-file", envvar="STRATA_ADMIN_AUTH_FILE", **_FILE,
        help="Credentials file (tokens, basic users); turns authentication on.")] = None,
    authorization: Annotated[str, typer.Option(
        "--authorization", envvar="STRATA_ADMIN_AUTHORIZATION",
        help="acl: the brokers' ACLs decide; none: any authenticated caller may do all.")
    ] = "acl",
    super_users: Annotated[str, typer.Option(
        "--super-users", envvar="STRATA_ADMIN_SUPER_USERS",
        help="The brokers' super.users (User:a;User:b).")] = "",
    allow_everyone: Annotated[bool, typer.Option(
        "--allow-everyone-if-no-acl-found", envvar="STRATA_ADMIN_ALLOW_EVERYONE_IF_NO_ACL_FOUND",
        help="The brokers' allow.everyone.if.no.acl.found.")] = False,
    acl_cache: Annotated[float, typer.Option(
        "--acl-cache", min=0.0, metavar="SECONDS", envvar="STRATA_ADMIN_ACL_CACHE",
        help="How long ACLs fetched from the brokers are reused.")] = 5.0,
    client_properties: Annotated[Path | None, typer.Option(
        "--client-properties", envvar="STRATA_ADMIN_CLIENT_PROPERTIES", **_FILE,
        help="librdkafka properties for the service's Kafka clients (security.protocol, "
             "sasl.*, ssl.*).")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(
        "--ssl-certfile", envvar="STRATA_ADMIN_SSL_CERTFILE", **_FILE,
        help="Serve HTTPS with this PEM certificate chain.")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(
        "--ssl-keyfile", envvar="STRATA_ADMIN_SSL_KEYFILE", **_FILE,
        help="The PEM private key of --ssl-certfile.")] = None,
    ssl_ca_certs: Annotated[Path | None, typer.Option(
        "--ssl-ca-certs", envvar="STRATA_ADMIN_SSL_CA_CERTS", **_FILE,
        help="PEM CA(s) client certificates must chain to.")] = None,
    ssl_client_auth: Annotated[str, typer.Option(
        "--ssl-client-auth", envvar="STRATA_ADMIN_SSL_CLIENT_AUTH",
        help="none, optional or required: ask HTTPS clients for a certificate.")] = "none",
) -> None:
    """Run the REST admin service (OpenAPI at /docs) until SIGTERM or SIGINT."""
    from strata.admin.server import run

    with reported_errors(ctx):
        settings, tls = _settings(bootstrap_servers, timeout, auth_file, authorization,
                                  super_users, allow_everyone, acl_cache, client_properties,
                                  ssl_certfile, ssl_keyfile, ssl_ca_certs, ssl_client_auth)
    raise typer.Exit(run(settings, host, port, log_level.lower(), tls))


def _settings(bootstrap_servers: str, timeout: float, auth_file: Path | None,
              authorization: str, super_users: str, allow_everyone: bool, acl_cache: float,
              client_properties: Path | None, ssl_certfile: Path | None,
              ssl_keyfile: Path | None, ssl_ca_certs: Path | None, ssl_client_auth: str
              ) -> tuple[AdminSettings, ServerTls | None]:
    from strata.admin.authentication import AuthorizationMode, AuthSettings
    from strata.admin.credentials import AdminCredentials, CredentialsError
    from strata.admin.kafka_gateway import AdminSettings, kafka_client_config
    from strata.admin.server import ServerTls
    from strata.broker.security.acl import parse_super_users

    try:
        auth = None
        if auth_file is not None:
            auth = AuthSettings(AdminCredentials.load(auth_file),
                                AuthorizationMode(authorization.lower()),
                                parse_super_users(super_users), allow_everyone, acl_cache)
        properties = client_properties.read_text(encoding="utf-8") if client_properties else ""
        kafka_config = kafka_client_config(os.environ, properties)
        tls = None
        if ssl_certfile is not None or ssl_keyfile is not None:
            if ssl_certfile is None or ssl_keyfile is None:
                raise ValueError("--ssl-certfile and --ssl-keyfile go together")
            tls = ServerTls(ssl_certfile, ssl_keyfile, ssl_ca_certs, ssl_client_auth.lower())
            tls.uvicorn_options()
    except (CredentialsError, ValueError, OSError) as exc:
        raise usage_error(str(exc)) from None
    return AdminSettings(bootstrap_servers, timeout, kafka_config, auth), tls
