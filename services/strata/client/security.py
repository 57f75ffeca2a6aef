"""``ClientSecurity``: how a Strata client logs in to a broker's listener (TLS and SASL).

One immutable value per connection target, built from a broker's inter-broker settings
(``strata.broker.network.listeners.inter_broker_client_security``) or from librdkafka-style
client properties (``strata.client.client_properties``), and consumed by ``BrokerClient``:
``ssl_context`` None means no TLS; ``sasl_mechanism`` None means no SASL (then ``username`` and
``password`` are unused).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client connects to a broker's listener: TLS context and SASL login, if any."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
