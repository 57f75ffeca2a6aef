"""``TlsClient``: an ``aetcd.Client`` whose gRPC channel is TLS (optionally with a client
certificate), for ``etcds://`` stores.

Why it exists: aetcd 1.0.0 (pinned) has no TLS option; ``aetcd.Client.connect`` always opens
``rpc.insecure_channel``. ``TlsClient.connect`` opens ``rpc.secure_channel`` (grpc.aio's, which
``aetcd.rpc`` re-exports) with ``grpc.ssl_channel_credentials`` and otherwise does what
aetcd's ``connect`` does for a client without username/password: create the stubs and the
watcher, mark the client connected. Everything else (``close``, the stubs, the watcher) is
aetcd's own. ``tests/unit/metadata/test_etcd_tls.py`` fails loudly if aetcd's ``connect``
changes shape (a new aetcd must be re-read before this override is trusted again).

No I/O at construction beyond what gRPC does lazily: the channel connects on the first RPC.
"""

from __future__ import annotations

from typing import Any

import aetcd
import grpc  # type: ignore[import-untyped]  # grpcio ships no stubs (aetcd's dependency)
from aetcd import rpc, watcher


class TlsClient(aetcd.Client):  # type: ignore[misc]  # aetcd ships no type hints
    """``aetcd.Client`` over TLS; ``pems`` is (CA bundle, key, chain) as ``StoreTls.read``
    returns them."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        options: dict[str, Any],
        pems: tuple[bytes | None, bytes | None, bytes | None],
    ) -> None:
        super().__init__(host=host, port=port, options=options)
        root, key, chain = pems
        self._credentials = grpc.ssl_channel_credentials(
            root_certificates=root, private_key=key, certificate_chain=chain
        )

    async def connect(self) -> None:
        """aetcd's ``connect`` with ``secure_channel`` (no etcd user auth, one caller: the
        session connects a client once, before sharing it)."""
        if self._connected.is_set():
            return
        target = f"{self._host}:{self._port}"
        self.channel = rpc.secure_channel(
            target, self._credentials, options=list(self._options.items())
        )
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._watcher = watcher.Watcher(
            rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
        )
        self._connected.set()
