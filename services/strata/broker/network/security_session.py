"""``SecuritySession``: one connection's authentication state and principal.

Owns the SASL state machine of a connection (Kafka's ``SaslServerAuthenticator``)::

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE --SaslAuthenticate*--> COMPLETE
        |                                                |
        +-- SaslHandshake(other mechanism): UNSUPPORTED_SASL_MECHANISM, stays HANDSHAKE
                                                         +-- bad token: FAILED (closed after
                                                             connection.failed.authentication.delay.ms)

Which requests a connection may send (``allows``): on a SASL listener, until COMPLETE only
ApiVersions, SaslHandshake and SaslAuthenticate — anything else closes the connection (Kafka
disconnects too). On other listeners everything is allowed and SaslHandshake is answered
ILLEGAL_SASL_STATE. A second SaslHandshake after COMPLETE (re-authentication, KIP-368) is
ILLEGAL_SASL_STATE as well: Strata does not re-authenticate yet.

The principal: ``User:<name>`` after SASL; on SSL, the client certificate's subject; else
``User:ANONYMOUS`` (``strata.broker.security.principal``). Only the connection's serve task
touches a session (requests on a connection are handled one at a time).

PLAIN (RFC 4616, ``[authzid] NUL authcid NUL passwd``) is checked against the user's stored
SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one: no plaintext password is ever stored.
"""

from __future__ import annotations

import enum
from typing import Final

from strata.broker.network.listeners import ListenerSecurity
from strata.broker.security import principal as principals
from strata.broker.security.scram import ScramCredential, ScramError, ScramServer
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

PRE_AUTH_APIS: Final = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                  ApiKey.SASL_AUTHENTICATE})
_INVALID: Final = "Authentication failed: invalid credentials"


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class AuthenticationFailed(Exception):
    """The message is what SaslAuthenticate's ``error_message`` says."""


class SecuritySession:
    def __init__(self, listener: ListenerSecurity, tls_principal: str = principals.ANONYMOUS
                 ) -> None:
        self.listener = listener
        self.principal = tls_principal
        self.state = SaslState.HANDSHAKE if listener.protocol.uses_sasl else SaslState.COMPLETE
        self.mechanism: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def allows(self, api_key: int) -> bool:
        return self.authenticated or (self.state is not SaslState.FAILED
                                      and api_key in PRE_AUTH_APIS)

    def handshake(self, mechanism: str) -> ErrorCode:
        if not self.listener.protocol.uses_sasl or self.state is not SaslState.HANDSHAKE:
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.listener.mechanisms:
            return ErrorCode.unsupported_sasl_mechanism
        self.mechanism = mechanism
        self.state = SaslState.AUTHENTICATE
        if mechanism != "PLAIN":
            self._scram = ScramServer(mechanism, self._lookup)
        return ErrorCode.none

    async def _lookup(self, mechanism: str, username: str) -> ScramCredential | None:
        store = self.listener.credentials
        return None if store is None else await store.get(mechanism, username)

    async def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate round: the server's answer, or ``AuthenticationFailed``."""
        if self.state is not SaslState.AUTHENTICATE:
            raise AuthenticationFailed("SaslAuthenticate before a successful SaslHandshake")
        try:
            if self._scram is None:
                answer = b""
                username = await self._plain(token)
            else:
                answer = await self._scram.evaluate(token)
                if not self._scram.complete:
                    return answer
                assert self._scram.username is not None
                username = self._scram.username
        except (ScramError, AuthenticationFailed) as exc:
            self.state = SaslState.FAILED
            raise AuthenticationFailed(str(exc)) from None
        self.state = SaslState.COMPLETE
        self.principal = principals.user(username)
        return answer

    async def _plain(self, token: bytes) -> str:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN message")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN message") from None
        if not username or (authzid and authzid != username):
            raise AuthenticationFailed(_INVALID)
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = await self._lookup(mechanism, username)
            if credential is not None:
                if credential.verifies(password):
                    return username
                break
        raise AuthenticationFailed(_INVALID)
