"""``open_store``: the ``metadata.store`` URL to a backend instance (Tansu's storage-by-URL).

Opening does no I/O: the SQLite file is opened on the store's own thread and the etcd channel
connects on the first call, so a bad path or an unreachable etcd surfaces from the first
operation (as ``StoreUnavailableError``), while a malformed URL fails here with ``ValueError``.
"""

from __future__ import annotations

import time

from .sqlite_store import SqliteStore
from .store import Clock, MetadataStore
from .url import EtcdUrl, parse_store_url


def open_store(url: str, *, clock: Clock = time.time) -> MetadataStore:
    """The store ``url`` names. ``clock`` (wall-clock seconds) expires SQLite leases; etcd
    keeps its own time."""
    parsed = parse_store_url(url)
    if isinstance(parsed, EtcdUrl):
        # Imported here: grpc and aetcd cost ~0.2 s to import, and the embedded default
        # (and every CLI command) does without them.
        from .etcd_store import EtcdStore

        return EtcdStore(parsed.endpoints)
    return SqliteStore(parsed.path, clock=clock)
