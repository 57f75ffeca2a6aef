"""Errors of the metadata store, shared by every backend (callers never see aetcd's, grpc's or
sqlite3's own exceptions).

``CompactedError`` is the one a caller is expected to handle in normal operation: it means the
history a watch asked for is gone, so the caller re-lists (``list`` gives entries and the
revision to watch from) and watches again.
"""

from __future__ import annotations


class MetadataStoreError(Exception):
    """Base of every metadata-store error."""


class CompactedError(MetadataStoreError):
    """A watch asked for history at or below the compacted revision."""

    def __init__(self, from_revision: int, compact_revision: int) -> None:
        super().__init__(
            f"watch from revision {from_revision}: history up to revision {compact_revision} "
            "was compacted; re-list and watch from the revision the list returns"
        )
        self.from_revision = from_revision
        self.compact_revision = compact_revision


class StoreUnavailableError(MetadataStoreError):
    """The backend could not be reached (or stayed locked) within the retry deadline. A write
    that raises this may or may not have been applied."""


class LeaseNotFoundError(MetadataStoreError):
    """A put named a lease that does not exist or has expired."""

    def __init__(self, lease_id: int) -> None:
        super().__init__(f"lease {lease_id} not found (expired or revoked)")
        self.lease_id = lease_id


class StoreClosedError(MetadataStoreError):
    """The store was used after ``close()``."""
