"""The broker's HTTP side door: ``/healthz``, ``/readyz`` and ``/metrics``.

Owns a deliberately tiny HTTP/1.1 server on asyncio streams (no web framework): one request per
connection, ``GET`` or ``HEAD``, answered and closed. Routes (docs/operations.md):

=========  =====================================================================================
path       answer
=========  =====================================================================================
/healthz   200 ``ok`` while the process serves its event loop (liveness)
/readyz    200 ``ready`` once the logs are loaded and the Kafka listener serves; else 503
/metrics   200 the broker's metrics in Prometheus' text format (``metrics.BrokerMetrics``),
          404 before the broker created its registry
=========  =====================================================================================

Requests are bounded: the head must arrive within ``READ_TIMEOUT_S`` and fit in
``MAX_HEAD_BYTES``; anything else gets 400 or is dropped. Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final, Protocol

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES: Final = 8192
READ_TIMEOUT_S: Final = 5.0

_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found",
                   405: "Method Not Allowed", 503: "Service Unavailable"}


class MetricsSource(Protocol):
    def exposition(self) -> bytes: ...


class HealthServer:
    """Serves health and readiness on ``host:port`` (port 0: a free one, see ``port``)."""

    def __init__(self, is_ready: Callable[[], bool]) -> None:
        self._is_ready = is_ready
        self.metrics: MetricsSource | None = None
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str | None, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host or None, port,
                                                  reuse_address=True, limit=MAX_HEAD_BYTES)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    def route(self, method: str, path: str) -> tuple[int, str]:
        """(status, body) for a request; pure, for tests."""
        if method not in ("GET", "HEAD"):
            return 405, "method not allowed\n"
        path = path.split("?", 1)[0]
        if path == "/healthz":
            return 200, "ok\n"
        if path == "/readyz":
            return (200, "ready\n") if self._is_ready() else (503, "not ready\n")
        if path == "/metrics" and self.metrics is not None:
            return 200, self.metrics.exposition().decode()
        return 404, "not found\n"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError):
                return
            if len(head) > MAX_HEAD_BYTES:
                status, body, method = 400, "request too large\n", "GET"
            else:
                parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
                if len(parts) != 3:
                    status, body, method = 400, "bad request\n", "GET"
                else:
                    method = parts[0]
                    status, body = self.route(method, parts[1])
            payload = body.encode()
            writer.write(
                (
                    f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                    "Content-Type: text/plain; charset=utf-8\r\n"
                    f"Content-Length: {len(payload)}\r\n"
                    "Connection: close\r\n\r\n"
                ).encode()
                + (b"" if method == "HEAD" else payload)
            )
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
