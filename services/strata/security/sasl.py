"""Security protocol and SASL vocabulary both ends of a Kafka connection share.

Owns Kafka's names, written once: the four ``security.protocol`` values (``SecurityProtocol``:
whether a connection is wrapped in TLS, whether it logs in with SASL), the SASL mechanisms Strata
serves and its clients speak (``SUPPORTED_MECHANISMS``), and the option syntax of a
``sasl.jaas.config`` login module line (``parse_jaas``)::

    org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";

Pure: no I/O. The broker reads these in ``strata.broker.network.listeners``; clients in
``strata.client.client_properties`` and the CLI's ``--command-config``.
"""

from __future__ import annotations

import enum
import re
from typing import Final

SUPPORTED_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


_JAAS_OPTION: Final = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas(text: str) -> dict[str, str]:
    """The ``key="value"`` options of a ``sasl.jaas.config`` login module line."""
    return {key: re.sub(r"\\(.)", r"\1", value) for key, value in _JAAS_OPTION.findall(text)}
