"""``BrokerClient``: one broker's connection to another, for inter-broker requests.

Replica fetchers send Fetch and OffsetForLeaderEpoch to partition leaders over it (Kafka's
``BlockingSend`` / ``NetworkClient`` of the ``ReplicaFetcherThread``). Requests are described
version-neutrally (``build_request``) and encoded by Strata's own codec; responses come back as
kio's dataclasses. One request at a time (a fetcher never pipelines), which keeps the reading
side trivial: the next frame is the answer, checked by correlation id.

Failures: connecting, sending or reading raise ``BrokerUnavailableError`` (with the address and
what failed) after closing the socket; the next ``request`` reconnects. Each request is bounded
by ``request_timeout_s`` (``replica.socket.timeout.ms`` for fetchers, which must exceed their
``replica.fetch.wait.max.ms`` long poll). ``close`` is idempotent. Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.protocol import RequestHeader, build_request, decode_response, encode_request

_SIZE: Final = struct.Struct(">i")


class BrokerUnavailableError(ConnectionError):
    """The other broker could not be reached or closed the connection."""


class BrokerClient:
    def __init__(self, host: str, port: int, *, client_id: str,
                 request_timeout_s: float = 30.0, connect_timeout_s: float = 5.0) -> None:
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
        body = build_request(api_key, version, fields)
        correlation_id = next(self._correlation_ids)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id),
                               body)
        try:
            async with asyncio.timeout(self.request_timeout_s):
                reader, writer = await self._connected()
                writer.write(frame)
                await writer.drain()
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                response = await reader.readexactly(size)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise BrokerUnavailableError(
                f"request {api_key} v{version} to {self.host}:{self.port} failed: "
                f"{type(exc).__name__}: {exc}") from exc
        got, decoded = decode_response(response, api_key, version)
        if got != correlation_id:
            await self.close()
            raise BrokerUnavailableError(
                f"{self.host}:{self.port} answered correlation id {got} to {correlation_id}")
        return decoded

    async def _connected(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            async with asyncio.timeout(self.connect_timeout_s):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self._reader, self._writer

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
