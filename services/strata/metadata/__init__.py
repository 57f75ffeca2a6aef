"""Strata's metadata store: one async interface (``MetadataStore``) with two backends chosen by
the ``metadata.store`` URL — ``sqlite:///path`` (embedded, the brokers of one host share the
file) and ``etcd://host:port,...`` (aetcd under a supervisor). docs/architecture.md; the key
layout the controller builds on and the semantics both backends share are in ``DESIGN.md``
beside this file and in ``store.py``.
"""

from .errors import (
    CompactedError,
    LeaseNotFoundError,
    MetadataStoreError,
    StoreClosedError,
    StoreUnavailableError,
)
from .factory import open_store
from .leases import Lease
from .store import (
    Clock,
    Compare,
    Delete,
    Entry,
    EventKind,
    MetadataStore,
    Op,
    Put,
    TxnResult,
    WatchEvent,
)
from .store_tls import StoreTls
from .url import EtcdUrl, SqliteUrl, parse_store_url

__all__ = [
    "Clock",
    "CompactedError",
    "Compare",
    "Delete",
    "Entry",
    "EtcdUrl",
    "EventKind",
    "Lease",
    "LeaseNotFoundError",
    "MetadataStore",
    "MetadataStoreError",
    "Op",
    "Put",
    "SqliteUrl",
    "StoreClosedError",
    "StoreTls",
    "StoreUnavailableError",
    "TxnResult",
    "WatchEvent",
    "open_store",
    "parse_store_url",
]
