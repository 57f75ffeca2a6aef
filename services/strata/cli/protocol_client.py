"""The CLI's way to the Kafka APIs librdkafka has no call for (reassignments, client quotas).

Owns the CLI's side of one request sent to the first bootstrap broker that answers
(``strata.client.bootstrap_request``), logged in the way the other commands' librdkafka
clients are: ``security.protocol``, ``sasl.mechanism``,
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
from strata.client.bootstrap_request import bootstrap_request
from strata.client.security import ClientSecurity


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The ``ClientSecurity`` for the ``--command-config`` properties (None for PLAINTEXT)."""
    try:
        return client_properties.client_security(properties)
    except client_properties.ClientPropertiesError as exc:
        raise CliError(f"--command-config: {exc}", exit_code=EXIT_USAGE) from None


def request(conn: Connection, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """Send one request to the first bootstrap broker that answers; its decoded response."""
    return asyncio.run(bootstrap_request(conn.bootstrap, client_security(conn.properties),
                                         conn.timeout_s, "strata-cli", api_key, version,
                                         fields))
