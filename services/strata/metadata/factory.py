"""``open_store``: the ``metadata.store`` URL to a backend instance (Tansu's storage-by-URL).

Opening does no network I/O: the SQLite file is opened on the store's own thread and the etcd
channel connects on the first call, so a bad path or an unreachable etcd surfaces from the
first operation (as ``StoreUnavailableError``), while a malformed URL, or ``metadata.store.ssl.*``
files that cannot be read, fail here with ``ValueError`` (the PEM files are read at once).
TLS settings with a URL that is not ``etcds://`` are refused too: they would be ignored.
"""

from __future__ import annotations

import time

from .sqlite_store import SqliteStore
from .store import Clock, MetadataStore
from .store_tls import StoreTls
from .url import EtcdUrl, parse_store_url


def open_store(
    url: str, *, clock: Clock = time.time, tls: StoreTls | None = None
) -> MetadataStore:
    """The store ``url`` names. ``clock`` (wall-clock seconds) expires SQLite leases; etcd
    keeps its own time. ``tls``: the PEM files for an ``etcds://`` URL."""
    parsed = parse_store_url(url)
    tls = tls or StoreTls()
    if tls.configured and not (isinstance(parsed, EtcdUrl) and parsed.tls):
        raise ValueError(
            f"metadata.store.ssl.* is set but metadata.store {url!r} is not an etcds:// URL "
            "(TLS to etcd is etcds://host:port)"
        )
    if isinstance(parsed, EtcdUrl):
        # Imported here: grpc and aetcd cost ~0.2 s to import, and the embedded default
        # (and every CLI command) does without them.
        from .etcd_store import EtcdStore

        pems = tls.read() if parsed.tls else None
        return EtcdStore(parsed.endpoints, tls=pems)
    return SqliteStore(parsed.path, clock=clock)
