"""``ConnectionSecurity``: one connection's security state and what it may send before login.

Owns the gate every frame passes before it is decoded (Kafka's ``SaslServerAuthenticator``):

* the connection's ``SecuritySession`` (``strata.broker.network.security_session``) of its
  listener; on a TLS connection the session starts with the client certificate's principal
  (``principal.from_certificate``), ``User:ANONYMOUS`` without one;
* ``refusal(frame)``: checked on the request header's first field (the API key) before the body
  is parsed, so an unauthenticated peer gets nothing decoded. On a SASL listener, until the
  session is authenticated only ApiVersions, SaslHandshake and SaslAuthenticate pass; anything
  else is a reason to close the connection (Kafka disconnects too);
* after a failed SaslAuthenticate (``failed``), the answer is sent, nothing more is handled,
  and the connection closes ``connection.failed.authentication.delay.ms``
  (``failed_authentication_delay_s``) later — the connection owns that sequence.

Only the connection's serve task (and ``connection_made`` before it starts) touches this.
"""

from __future__ import annotations

import logging
import struct
from typing import Final

from strata.broker.network.listeners import ListenerSecurity, SecurityProtocol
from strata.broker.network.security_session import SecuritySession
from strata.broker.security import principal as principals

logger = logging.getLogger(__name__)

_API_KEY: Final = struct.Struct(">h")


class ConnectionSecurity:
    def __init__(self, listener: ListenerSecurity | None = None) -> None:
        self.listener = listener or ListenerSecurity("PLAINTEXT", SecurityProtocol.PLAINTEXT)
        self.session = SecuritySession(self.listener)

    def on_tls(self, peercert: dict[str, object] | None, peer: str) -> None:
        """The TLS handshake is done: the principal is the client certificate's subject."""
        self.session = SecuritySession(self.listener, principals.from_certificate(peercert))
        if self.session.principal != principals.ANONYMOUS:
            logger.info("TLS client %s on listener %s is %s", peer, self.listener.name,
                        self.session.principal)

    def refusal(self, frame: bytes) -> str | None:
        """Why ``frame`` must not be handled (the connection closes), or None to go on."""
        api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
        if self.session.allows(api_key):
            return None
        return f"API key {api_key} from {self.session.principal} before SASL authentication"

    @property
    def failed(self) -> bool:
        """A SaslAuthenticate failed: close after the answer and the delay."""
        return self.session.failed

    @property
    def failed_authentication_delay_s(self) -> float:
        return self.listener.failed_authentication_delay_s

    @property
    def closing_reason(self) -> str:
        return f"failed authentication ({self.session.mechanism})"
