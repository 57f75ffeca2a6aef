"""The supervisor around aetcd: one connection to an etcd cluster that survives etcd restarts.

aetcd (1.0.0) gives us a gRPC channel and etcd's stubs, but neither retries nor fails over,
and raises whenever etcd goes away. ``EtcdSession`` owns one ``aetcd.Client`` at a time,
connected to one endpoint of the ``etcd://`` URL (over TLS for ``etcds://``: every client
it opens, after failover too, is a ``TlsClient`` with the same credentials), and runs every
unary RPC through ``call``:

* retryable failures (UNAVAILABLE: etcd down, restarting or between leaders; DEADLINE_EXCEEDED;
  CANCELLED by a channel we closed) are retried with exponential backoff (50 ms doubling to
  1 s) until ``retry_deadline_s`` has passed since the call began, then ``StoreUnavailableError``;
* after a failure, with several endpoints, the next call goes to the next endpoint (the old
  client is closed); with one endpoint the gRPC channel reconnects by itself (reconnect backoff
  capped at 1 s so a restarted etcd is found quickly);
* each attempt has its own ``rpc_timeout_s``; other gRPC errors are mapped to our errors.

A retried write may already have been applied by the attempt that failed (etcd cannot tell us):
callers see that as a failed compare on the retry and re-read, which every compare-and-set
caller does anyway. Event-loop only; the client is swapped only in ``_failover``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aetcd
from aetcd import rpc

from .errors import LeaseNotFoundError, MetadataStoreError, StoreClosedError, StoreUnavailableError
from .etcd_tls import TlsClient

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE = frozenset(
    {rpc.StatusCode.UNAVAILABLE, rpc.StatusCode.DEADLINE_EXCEEDED, rpc.StatusCode.CANCELLED}
)

# gRPC channel options: reconnect fast after an etcd restart; ping an idle connection so a
# vanished (not just restarted) etcd is noticed (etcd's default keepalive policy allows pings
# every 5 s); accept large list answers (gRPC's default limit is 4 MiB).
CHANNEL_OPTIONS: dict[str, Any] = {
    "grpc.max_receive_message_length": 256 * 1024 * 1024,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
}

BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 1.0


class EtcdSession:
    """One live ``aetcd.Client`` with retry and endpoint failover; see the module docstring."""

    def __init__(
        self,
        endpoints: tuple[tuple[str, int], ...],
        *,
        retry_deadline_s: float = 10.0,
        rpc_timeout_s: float = 2.0,
        tls: tuple[bytes | None, bytes | None, bytes | None] | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoints")
        self.endpoints = endpoints
        self.tls = tls
        self.retry_deadline_s = retry_deadline_s
        self.rpc_timeout_s = rpc_timeout_s
        self._index = 0
        self._client: Any = None
        self._closed = False

    @property
    def endpoint(self) -> str:
        host, port = self.endpoints[self._index]
        return f"{host}:{port}"

    async def client(self) -> Any:
        """The current ``aetcd.Client`` (connected lazily: no I/O until its first RPC)."""
        if self._closed:
            raise StoreClosedError("metadata store closed")
        if self._client is None:
            host, port = self.endpoints[self._index]
            client = (
                aetcd.Client(host=host, port=port, options=CHANNEL_OPTIONS)
                if self.tls is None
                else TlsClient(host=host, port=port, options=CHANNEL_OPTIONS, pems=self.tls)
            )
            await client.connect()
            self._client = client
        return self._client

    async def call(
        self, what: str, rpc_call: Callable[[Any], Awaitable[T]], *, lease_id: int | None = None
    ) -> T:
        """Run ``rpc_call(client)`` with retries; ``what`` names it in errors, ``lease_id`` the
        lease a NOT_FOUND answer is about."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_deadline_s
        backoff = BACKOFF_INITIAL_S
        while True:
            client = await self.client()
            try:
                return await rpc_call(client)
            except rpc.AioRpcError as exc:
                if exc.code() not in RETRYABLE or self._closed:
                    raise map_error(what, exc, lease_id) from exc
                if loop.time() + backoff > deadline:
                    raise StoreUnavailableError(
                        f"etcd {what}: no answer from {', '.join(self._names())} within "
                        f"{self.retry_deadline_s:g} s: {exc.details()}{self._tls_hint(exc)}"
                    ) from exc
                log.info("etcd %s failed on %s, retrying: %s", what, self.endpoint, exc.details())
            await self.failover(client)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def failover(self, failed: Any) -> None:
        """After ``failed`` (a client) failed: move to the next endpoint when there is one."""
        if len(self.endpoints) == 1 or failed is not self._client:
            return
        self._client = None
        self._index = (self._index + 1) % len(self.endpoints)
        await _close_quietly(failed)

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await _close_quietly(client)

    def _tls_hint(self, exc: Any) -> str:
        """What to check when the failure looks like TLS (gRPC reports a failed handshake
        as UNAVAILABLE, indistinguishable by code from etcd being down)."""
        details = str(exc.details()).lower()
        if self.tls is None:
            if "connection reset" in details or "socket closed" in details:
                return " (is etcd serving TLS? then use an etcds:// URL)"
            return ""
        if any(w in details for w in ("ssl", "tls", "handshake", "certificate", "secure")):
            return (
                " (TLS: is metadata.store.ssl.cafile the CA that signed etcd's certificate, "
                "does that certificate name the endpoint's host, and does etcd's "
                "--trusted-ca-file trust metadata.store.ssl.certfile?)"
            )
        return ""

    def _names(self) -> list[str]:
        return [f"{host}:{port}" for host, port in self.endpoints]


def map_error(what: str, exc: Any, lease_id: int | None = None) -> MetadataStoreError:
    """Our error for a gRPC error that retrying will not fix."""
    details = str(exc.details())
    if lease_id is not None and exc.code() == rpc.StatusCode.NOT_FOUND and "lease" in details:
        return LeaseNotFoundError(lease_id)
    if exc.code() in RETRYABLE:
        return StoreUnavailableError(f"etcd {what}: {details}")
    return MetadataStoreError(f"etcd {what}: {exc.code().name}: {details}")


async def _close_quietly(client: Any) -> None:
    try:
        await client.close()
    except Exception as exc:  # noqa: BLE001 - a dying channel may fail to close; it is dropped
        log.debug("closing etcd client: %s", exc)
