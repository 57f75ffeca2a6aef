"""The client side of SASL over the Kafka protocol: what a follower does before fetching.

Owns the exchange a ``BrokerClient`` runs right after connecting to a SASL listener:
SaslHandshake v1 (naming the mechanism), then SaslAuthenticate v1 rounds — one for PLAIN, two
for SCRAM (client-first, client-final) with the server's signature verified at the end. Any
error code, or a server signature that does not match, raises ``SaslClientError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from strata.broker.security.scram import ScramClient, ScramError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

Send = Callable[[int, int, Mapping[str, Any]], Awaitable[Any]]


class SaslClientError(ConnectionError):
    """The other broker refused our login."""


async def sasl_login(send: Send, mechanism: str, username: str, password: str) -> None:
    response = await send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if response.error_code != ErrorCode.none:
        raise SaslClientError(f"SaslHandshake {mechanism}: {response.error_code.name} "
                              f"(enabled: {', '.join(response.mechanisms)})")

    async def round_trip(token: bytes) -> bytes:
        answer = await send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
        if answer.error_code != ErrorCode.none:
            raise SaslClientError(f"SaslAuthenticate {mechanism} as {username}: "
                                  f"{answer.error_code.name}: {answer.error_message}")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await round_trip(b"\x00" + username.encode() + b"\x00" + password.encode())
        return
    client = ScramClient(mechanism, username, password)
    try:
        server_first = await round_trip(client.first())
        server_final = await round_trip(client.final(server_first))
        client.verify(server_final)
    except ScramError as exc:
        raise SaslClientError(f"SCRAM with the other broker failed: {exc}") from exc
