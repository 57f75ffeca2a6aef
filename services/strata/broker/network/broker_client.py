"""``BrokerClient``: one broker's connection to another, for inter-broker requests.

Replica fetchers send Fetch and OffsetForLeaderEpoch to partition leaders over it (Kafka's
``BlockingSend`` / ``NetworkClient`` of the ``ReplicaFetcherThread``). Requests are described
version-neutrally (``build_request``) and encoded by Strata's own codec; responses come back as
kio's dataclasses. One request at a time (a fetcher never pipelines), which keeps the reading
side trivial: the next frame is the answer, checked by correlation id. ``request_encoded``
takes a body encoded by hand and returns the raw response (the follower's Fetch hot path:
``follower_fetch_codec``).

Failures: connecting, sending or reading raise ``BrokerUnavailableError`` (with the address and
what failed) after closing the socket; the next ``request`` reconnects. Each request is bounded
by ``request_timeout_s`` (``replica.socket.timeout.ms`` for fetchers, which must exceed their
``replica.fetch.wait.max.ms`` long poll). ``close`` is idempotent. Event-loop only.

Security: with a ``ClientSecurity`` the connection is TLS (its ``ssl_context``, the server's
host name checked when the context says so) and/or logs in with SASL right after connecting
(``strata.broker.security.sasl_client``), before the first request; a refused login is a
``BrokerUnavailableError`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.network.listeners import ClientSecurity
from strata.broker.security.sasl_client import SaslClientError, sasl_login
from strata.protocol import RequestHeader, build_request, decode_response, encode_request
from strata.protocol.header import encode_request_header, read_response_header

_SIZE: Final = struct.Struct(">i")


class BrokerUnavailableError(ConnectionError):
    """The other broker could not be reached or closed the connection."""


class BrokerClient:
    def __init__(self, host: str, port: int, *, client_id: str,
                 request_timeout_s: float = 30.0, connect_timeout_s: float = 5.0,
                 security: ClientSecurity | None = None) -> None:
        self.security = security
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"BrokerClient({self.host}:{self.port})"

    async def request(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        """Send one request and return its decoded response body."""
        try:
            async with asyncio.timeout(self.request_timeout_s):
                reader, writer = await self._connected()
                return await self._exchange(reader, writer, api_key, version, fields)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise BrokerUnavailableError(
                f"request {api_key} v{version} to {self.host}:{self.port} failed: "
                f"{type(exc).__name__}: {exc}") from exc

    async def request_encoded(self, api_key: int, version: int, body: bytes) -> tuple[bytes, int]:
        """Send a request whose body the caller encoded (a hot path's hand-written writer);
        return the response frame (without its size) and the offset of its body. The response
        header must be v0 (every non-flexible version's)."""
        try:
            async with asyncio.timeout(self.request_timeout_s):
                reader, writer = await self._connected()
                correlation_id = next(self._correlation_ids)
                header = encode_request_header(
                    RequestHeader(api_key, version, correlation_id, self.client_id), 1)
                response = await self._send(reader, writer, api_key, version,
                                            (_SIZE.pack(len(header) + len(body)), header, body))
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise BrokerUnavailableError(
                f"request {api_key} v{version} to {self.host}:{self.port} failed: "
                f"{type(exc).__name__}: {exc}") from exc
        got, offset = read_response_header(response, 0)
        await self._check_correlation(got, correlation_id)
        return response, offset

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        body = build_request(api_key, version, fields)
        correlation_id = next(self._correlation_ids)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id),
                               body)
        response = await self._send(reader, writer, api_key, version, (frame,))
        got, decoded = decode_response(response, api_key, version)
        await self._check_correlation(got, correlation_id)
        return decoded

    async def _send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    api_key: int, version: int, chunks: tuple[bytes, ...]) -> bytes:
        try:
            writer.writelines(chunks)
            await writer.drain()
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            return await reader.readexactly(size)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise BrokerUnavailableError(
                f"request {api_key} v{version} to {self.host}:{self.port} failed: "
                f"{type(exc).__name__}: {exc}") from exc

    async def _check_correlation(self, got: int, expected: int) -> None:
        if got != expected:
            await self.close()
            raise BrokerUnavailableError(
                f"{self.host}:{self.port} answered correlation id {got} to {expected}")

    async def _connected(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            security = self.security
            context = security.ssl_context if security is not None else None
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context,
                    server_hostname=self.host if context is not None else None)
            if security is not None and security.sasl_mechanism is not None:
                async def send(api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
                    return await self._exchange(reader, writer, api_key, version, fields)

                try:
                    await sasl_login(send, security.sasl_mechanism, security.username,
                                     security.password)
                except SaslClientError:
                    writer.close()
                    raise
            self._reader, self._writer = reader, writer
        return self._reader, self._writer

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
