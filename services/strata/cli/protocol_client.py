"""The CLI's way to the Kafka APIs librdkafka has no call for (partition reassignments).

Owns one request sent to the first bootstrap broker that answers, over Strata's own Kafka
protocol client (``strata.client.broker_client.BrokerClient``), logged in the way the other
commands' librdkafka clients are: ``security.protocol``, ``sasl.mechanism``,
``sasl.username``/``sasl.password`` and the ``ssl.*`` PEM files of ``--command-config``
(``Connection.properties``), read by ``strata.client.client_properties``. Still the
Kafka protocol only (docs/architecture.md, "Packages").

Invariant: every request is bounded by ``--timeout``; no broker answering is the same
unreachable ``KafkaClientError`` as the librdkafka commands raise (the "cannot reach a broker
at ..." line).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from strata.cli.errors import EXIT_USAGE, CliError
from strata.cli.kafka_client import Connection
from strata.client import client_properties
from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.kafka_errors import KafkaClientError
from strata.client.security import ClientSecurity


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The ``ClientSecurity`` for the ``--command-config`` properties (None for PLAINTEXT)."""
    try:
        return client_properties.client_security(properties)
    except client_properties.ClientPropertiesError as exc:
        raise CliError(f"--command-config: {exc}", exit_code=EXIT_USAGE) from None


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
    raise KafkaClientError("_TRANSPORT", last, subject=f"the cluster at {conn.bootstrap}",
                           unreachable=True, reason=last, bootstrap=conn.bootstrap,
                           timeout_s=conn.timeout_s)
