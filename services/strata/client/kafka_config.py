"""The librdkafka properties every confluent-kafka client of Strata's tools starts from.

Owns the bounded-wait settings the CLI, the admin service and the operator share, so a client
against an unreachable cluster fails within ``timeout_s`` instead of librdkafka's minute-long
defaults: ``socket.timeout.ms`` (each request; librdkafka's admin timeouts default to it) and
``socket.connection.setup.timeout.ms`` are ``timeout_s``; reconnects back off from 100 ms to at
most 1 s; librdkafka's own log lines are off (``log_level`` 0): connection problems reach the
caller through ``error_cb`` and failed requests through their results, so stderr carries only
the caller's own messages.

``properties`` (the login: ``security.protocol``, ``sasl.*``, ``ssl.*``...) come first; the
bootstrap servers, client id and the settings above always win over them. Pure: a dict out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def client_config(bootstrap_servers: str, client_id: str, timeout_s: float,
                  properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka properties for a client of ``bootstrap_servers`` bounded by ``timeout_s``."""
    timeout_ms = int(timeout_s * 1000)
    return {
        **(properties or {}),
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "socket.timeout.ms": timeout_ms,
        "socket.connection.setup.timeout.ms": timeout_ms,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "log_level": 0,
    }
