"""The CLI's way to the Kafka APIs librdkafka has no call for (partition reassignments).

Owns one request sent to the first bootstrap broker that answers, over Strata's own Kafka
protocol client (``strata.broker.broker_client.BrokerClient``), logged in the way the other
commands' librdkafka clients are: ``security.protocol``, ``sasl.mechanism``,
``sasl.username``/``sasl.password`` and the ``ssl.*`` PEM files of ``--command-config``
(``Connection.properties``). Still the Kafka protocol only (ARCHITECTURE.md §2).

Invariant: every request is bounded by ``--timeout``; no broker answering is the same
"cannot reach a broker at ..." ``CliError`` as the librdkafka commands give.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any

from strata.broker.broker_client import BrokerClient, BrokerUnavailableError
from strata.broker.security.listeners import SUPPORTED_MECHANISMS, ClientSecurity
from strata.cli.errors import EXIT_USAGE, CliError
from strata.cli.kafka_client import Connection


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The ``ClientSecurity`` for librdkafka-style ``properties`` (None for PLAINTEXT)."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise CliError(f"--command-config: security.protocol={protocol} is not one of "
                       "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", exit_code=EXIT_USAGE)
    if protocol == "PLAINTEXT":
        return None
    context = _ssl_context(properties) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(ssl_context=context)
    mechanism = properties.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise CliError(f"--command-config: sasl.mechanism={mechanism} is not one of "
                       f"{', '.join(SUPPORTED_MECHANISMS)}", exit_code=EXIT_USAGE)
    return ClientSecurity(context, mechanism, properties.get("sasl.username", ""),
                          properties.get("sasl.password", ""))


def _ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=properties.get("ssl.ca.location"))
    if properties.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    certificate = properties.get("ssl.certificate.location")
    if certificate:
        try:
            context.load_cert_chain(certificate, properties.get("ssl.key.location"),
                                    properties.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as exc:
            raise CliError(f"--command-config: cannot load {certificate}: {exc}",
                           exit_code=EXIT_USAGE) from None
    return context


def request(conn: Connection, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """Send one request to the first bootstrap broker that answers; its decoded response."""
    return asyncio.run(_request(conn, api_key, version, fields))


async def _request(conn: Connection, api_key: int, version: int,
                   fields: Mapping[str, Any]) -> Any:
    security = client_security(conn.properties)
    last = "no bootstrap server given"
    for address in filter(None, (a.strip() for a in conn.bootstrap.split(","))):
        host, _, port = address.rpartition(":")
        client = BrokerClient(host.strip("[]"), int(port), client_id="strata-cli",
                              request_timeout_s=conn.timeout_s,
                              connect_timeout_s=conn.timeout_s, security=security)
        try:
            return await client.request(api_key, version, fields)
        except BrokerUnavailableError as exc:
            last = str(exc)
        finally:
            await client.close()
    raise CliError(f"cannot reach a broker at {conn.bootstrap} within {conn.timeout_s:g}s: "
                   f"{last}")
