"""The metadata-store interface every backend implements, and the values it speaks in.

Patroni's DCS is the model: a flat key space of ``str`` keys holding
``bytes`` values, versioned by one store-wide **revision** that every successful write bumps by
exactly one (etcd's revision; the SQLite backend keeps its own counter).

Invariants every backend upholds (``tests/integration/metadata`` checks them against both):

* ``Entry.version`` is the revision of the last write of that key (etcd's ``mod_revision``),
  always > 0. Version 0 means "absent" wherever a version is compared.
* A write returns the new store revision; a write that changes nothing (a failed compare, the
  delete of an absent key) does not bump the revision.
* ``transaction`` is all-or-nothing: every ``Compare`` holds and every op is applied at one new
  revision, or nothing is applied. A controller fences each write by a ``Compare`` on the
  controller-epoch key in the same transaction (KAFKA-6082's rule).
* ``list`` returns the entries under a prefix sorted by key and the revision they are
  consistent at; ``watch(prefix, from_revision=that)`` then yields every later change exactly
  once, in revision order (events of one transaction share its revision, in op order). A watch
  whose ``from_revision`` precedes the retained history raises ``CompactedError``: re-list.
* A lease expires ``ttl_s`` after its grant or last keep-alive; its expiry deletes every key put
  with it, at one revision, with a DELETE event per key. ``grant_lease`` keeps the lease alive
  from our own task every ``ttl_s / 3`` until it is revoked or the store closes; ``close`` does
  not revoke (a crashed broker and a closed store look the same: the lease runs out).

Backends: ``strata.metadata.sqlite_store`` (embedded, one file per host) and
``strata.metadata.etcd_store``; ``strata.metadata.factory.open_store`` picks one by URL.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .leases import Lease

Clock = Callable[[], float]
"""Wall-clock seconds (``time.time``); injected where leases expire so tests can drive it."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One key as read: its value, the revision of its last write, its lease (None if none)."""

    key: str
    value: bytes
    version: int
    lease: int | None = None


@dataclass(frozen=True, slots=True)
class Compare:
    """Holds when ``key``'s version equals ``version`` (0: the key must be absent)."""

    key: str
    version: int


@dataclass(frozen=True, slots=True)
class Put:
    """Set ``key`` to ``value``, attached to ``lease`` (which must be live) if given."""

    key: str
    value: bytes
    lease: int | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove ``key``; a no-op if it is absent."""

    key: str


Op = Put | Delete


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Outcome of a transaction.

    ``revision`` is the store revision after it (the revision of its writes when it succeeded
    and changed something). ``conflicts`` names the keys whose compare failed, so a controller
    can tell "fenced: another controller's epoch" from "lost a race on a partition state".
    """

    succeeded: bool
    revision: int
    conflicts: tuple[str, ...] = ()


def check_txn(compares: Sequence[Compare], ops: Sequence[Op]) -> None:
    """``ValueError`` for an empty key or a key written twice in one transaction (etcd refuses
    both; the SQLite backend refuses them too so the backends agree)."""
    for compare in compares:
        if not compare.key or compare.version < 0:
            raise ValueError(f"bad compare {compare!r}")
    seen: set[str] = set()
    for op in ops:
        if not op.key:
            raise ValueError("metadata keys must be non-empty")
        if op.key in seen:
            raise ValueError(f"key {op.key!r} written twice in one transaction")
        seen.add(op.key)


class EventKind(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change seen by a watch; ``value`` is ``b""`` for a DELETE."""

    kind: EventKind
    key: str
    value: bytes
    revision: int


class MetadataStore(Protocol):
    """The async metadata-store interface. Methods may be called concurrently from one event
    loop; every method raises ``StoreUnavailableError`` when the backend cannot be reached
    within its retry deadline, and ``StoreClosedError`` after ``close``."""

    async def get(self, key: str) -> Entry | None:
        """The key's entry, or None when absent."""
        ...

    async def list(self, prefix: str) -> tuple[list[Entry], int]:
        """Entries whose key starts with ``prefix`` (all keys for ``""``), sorted by key, and
        the store revision they are consistent at."""
        ...

    async def put(self, key: str, value: bytes, *, lease: int | None = None) -> int:
        """Write unconditionally; returns the new version. ``LeaseNotFoundError`` if the lease
        is not live."""
        ...

    async def compare_and_set(
        self, key: str, value: bytes, *, version: int, lease: int | None = None
    ) -> int | None:
        """Write only if ``key``'s version is ``version`` (0: absent); the new version, or None
        when the compare failed."""
        ...

    async def delete(self, key: str, *, version: int | None = None) -> bool:
        """Remove ``key`` (only at ``version`` if given); True if something was deleted."""
        ...

    async def transaction(self, compares: Sequence[Compare], ops: Sequence[Op]) -> TxnResult:
        """Apply ``ops`` at one revision iff every compare holds; all-or-nothing."""
        ...

    async def grant_lease(self, ttl_s: float, *, keep_alive: bool = True) -> Lease:
        """A new lease of at least ``ttl_s`` seconds (etcd rounds up to whole seconds), kept
        alive by our own task unless ``keep_alive`` is False."""
        ...

    async def revoke_lease(self, lease_id: int) -> None:
        """End the lease now: stop its keep-alive, delete its keys (DELETE events). A lease
        that is already gone is not an error."""
        ...

    def watch(self, prefix: str, *, from_revision: int) -> AsyncIterator[WatchEvent]:
        """Every change under ``prefix`` with a revision > ``from_revision``, in order, none
        lost or repeated, across reconnects; ``CompactedError`` when that history is gone.
        An async generator: ``aclose()`` it (or use ``contextlib.aclosing``) to stop."""
        ...

    async def compact(self, revision: int) -> None:
        """Discard the history at and below ``revision`` (< the current revision): a later
        watch from an older revision raises ``CompactedError``."""
        ...

    async def close(self) -> None:
        """Stop keep-alives and watches, release the connection. Idempotent."""
        ...


class TransactionalWrites:
    """``put`` and ``compare_and_set`` in terms of a backend's ``transaction`` (one definition
    for both backends, so they cannot drift apart)."""

    async def transaction(self, compares: Sequence[Compare], ops: Sequence[Op]) -> TxnResult:
        raise NotImplementedError

    async def put(self, key: str, value: bytes, *, lease: int | None = None) -> int:
        result = await self.transaction((), (Put(key, value, lease),))
        return result.revision

    async def compare_and_set(
        self, key: str, value: bytes, *, version: int, lease: int | None = None
    ) -> int | None:
        result = await self.transaction((Compare(key, version),), (Put(key, value, lease),))
        return result.revision if result.succeeded else None
