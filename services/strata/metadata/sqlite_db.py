"""The SQLite backend's synchronous core: every store operation as one short transaction on
one connection (layout in ``sqlite_schema``).

Rules every method follows:

* a write begins with ``BEGIN IMMEDIATE`` (takes the write lock before reading, so a
  read-then-write never fails with SQLITE_BUSY_SNAPSHOT), bumps ``meta.revision`` once if it
  changes anything, appends one ``events`` row per changed key, and commits — or rolls back
  entirely on any error (a killed process leaves no partial write: SQLite's journal);
* a read that needs more than one statement runs in a short deferred ``BEGIN`` ... ``COMMIT``
  so it sees one snapshot; nothing stays open between calls;
* lease expiry compares ``expires_at`` with the injected wall clock: a lease past its expiry
  is dead for puts and keep-alives at once, whoever reaps its keys later.

Not thread-safe: one ``SqliteDb`` belongs to one thread (``sqlite_store`` runs it on a
dedicated thread). ``sqlite3.OperationalError`` (the write lock still held by another process
after the busy timeout, I/O errors) surfaces as ``StoreUnavailableError``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import CompactedError, LeaseNotFoundError, StoreUnavailableError
from .keys import decode_key, encode_key, prefix_end
from .sqlite_schema import DELETE, PUT, connect
from .store import Clock, Compare, Entry, EventKind, Op, Put, TxnResult, WatchEvent


@dataclass(frozen=True, slots=True)
class EventRow:
    """An ``events`` row: the watch event and its id (the pollers' cursor)."""

    id: int
    event: WatchEvent


@dataclass(frozen=True, slots=True)
class Housekeeping:
    """What a cheap read says needs doing: leases to expire, history to compact."""

    expired_leases: bool
    revision: int
    compact_revision: int


class SqliteDb:
    """One connection to the store file; see the module docstring."""

    def __init__(self, path: str, *, clock: Clock, busy_timeout_s: float) -> None:
        self._clock = clock
        try:
            self._conn = connect(path, busy_timeout_s=busy_timeout_s)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"cannot open metadata store {path}: {exc}") from exc

    def close(self) -> None:
        self._conn.close()

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        with _errors():
            row = self._conn.execute(
                "SELECT key, value, mod_revision, lease FROM kv WHERE key = ?", (encode_key(key),)
            ).fetchone()
        return None if row is None else _entry(row)

    def list_prefix(self, prefix: str) -> tuple[list[Entry], int]:
        where, args = _prefix_clause(prefix)
        with self._read():
            revision = self._meta("revision")
            rows = self._conn.execute(
                f"SELECT key, value, mod_revision, lease FROM kv {where} ORDER BY key", args
            ).fetchall()
        return [_entry(row) for row in rows], revision

    def last_event_id(self) -> int:
        with _errors():
            (last,) = self._conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()
        return int(last)

    def history(self, prefix: str, from_revision: int, up_to_id: int) -> list[EventRow]:
        """Events under ``prefix`` with revision > ``from_revision`` and id <= ``up_to_id``;
        ``CompactedError`` if some of them may be gone."""
        where, args = _prefix_clause(prefix)
        where = f"{where} AND" if where else "WHERE"
        with self._read():
            compact_revision = self._meta("compact_revision")
            if from_revision < compact_revision:
                raise CompactedError(from_revision, compact_revision)
            rows = self._conn.execute(
                "SELECT id, revision, kind, key, value FROM events "
                f"{where} revision > ? AND id <= ? ORDER BY id",
                (*args, from_revision, up_to_id),
            ).fetchall()
        return [_event_row(row) for row in rows]

    def events_after(self, last_id: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` events with id > ``last_id``, in order; ``CompactedError`` if
        compaction already deleted some of them."""
        with self._read():
            compacted_id = self._meta("compact_event_id")
            if compacted_id > last_id:
                raise CompactedError(last_id, self._meta("compact_revision"))
            rows = self._conn.execute(
                "SELECT id, revision, kind, key, value FROM events WHERE id > ? ORDER BY id "
                "LIMIT ?",
                (last_id, limit),
            ).fetchall()
        return [_event_row(row) for row in rows]

    def housekeeping(self) -> Housekeeping:
        with _errors():
            row = self._conn.execute(
                "SELECT EXISTS (SELECT 1 FROM leases WHERE expires_at <= ?), "
                "(SELECT value FROM meta WHERE name = 'revision'), "
                "(SELECT value FROM meta WHERE name = 'compact_revision')",
                (self._clock(),),
            ).fetchone()
        return Housekeeping(bool(row[0]), int(row[1]), int(row[2]))

    # -- writes -------------------------------------------------------------------------------

    def txn(self, compares: Sequence[Compare], ops: Sequence[Op]) -> tuple[TxnResult, int]:
        """All-or-nothing; returns the result and how many keys the ops deleted."""
        with self._write() as revision:
            conflicts = tuple(c.key for c in compares if self._version(c.key) != c.version)
            if conflicts:
                return TxnResult(False, revision, conflicts), 0
            now = self._clock()
            for op in ops:
                if isinstance(op, Put) and op.lease is not None and not self._live(op.lease, now):
                    raise LeaseNotFoundError(op.lease)
            new_revision = revision + 1
            changed = deleted = 0
            for op in ops:
                if isinstance(op, Put):
                    self._put(op.key, op.value, op.lease, new_revision)
                    changed += 1
                elif self._delete(encode_key(op.key), new_revision):
                    changed += 1
                    deleted += 1
            if changed:
                self._set_meta("revision", new_revision)
                return TxnResult(True, new_revision), deleted
            return TxnResult(True, revision), 0

    def grant_lease(self, ttl_s: float) -> int:
        with self._write():
            cursor = self._conn.execute(
                "INSERT INTO leases (ttl, expires_at) VALUES (?, ?)", (ttl_s, self._clock() + ttl_s)
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

    def refresh_lease(self, lease_id: int) -> bool:
        """Extend a live lease by its TTL from now; False if it has expired or is gone."""
        with self._write():
            now = self._clock()
            cursor = self._conn.execute(
                "UPDATE leases SET expires_at = ? + ttl WHERE id = ? AND expires_at > ?",
                (now, lease_id, now),
            )
            return cursor.rowcount == 1

    def revoke_lease(self, lease_id: int) -> None:
        with self._write() as revision:
            self._end_lease(lease_id, revision)

    def expire_leases(self) -> int:
        """Reap every lease past its expiry (each at its own revision); how many."""
        with self._write() as revision:
            expired = [
                lease_id
                for (lease_id,) in self._conn.execute(
                    "SELECT id FROM leases WHERE expires_at <= ? ORDER BY id", (self._clock(),)
                )
            ]
            for lease_id in expired:
                revision = self._end_lease(lease_id, revision)
            return len(expired)

    def compact(self, revision: int) -> None:
        """Drop the events at and below ``revision`` (which must be below the store's)."""
        with self._write() as current:
            if revision >= current:
                raise ValueError(f"compact({revision}): must be below the revision {current}")
            if revision <= self._meta("compact_revision"):
                return
            (last_id,) = self._conn.execute(
                "SELECT coalesce(max(id), 0) FROM events WHERE revision <= ?", (revision,)
            ).fetchone()
            self._conn.execute("DELETE FROM events WHERE revision <= ?", (revision,))
            self._set_meta("compact_revision", revision)
            self._set_meta("compact_event_id", max(int(last_id), self._meta("compact_event_id")))

    # -- helpers ------------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[None]:
        with _errors():
            self._conn.execute("BEGIN")
            try:
                yield
            finally:
                self._conn.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[int]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any error); yields the current revision."""
        with _errors():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._meta("revision")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _meta(self, name: str) -> int:
        (value,) = self._conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return int(value)

    def _set_meta(self, name: str, value: int) -> None:
        self._conn.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))

    def _version(self, key: str) -> int:
        row = self._conn.execute(
            "SELECT mod_revision FROM kv WHERE key = ?", (encode_key(key),)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _live(self, lease_id: int, now: float) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM leases WHERE id = ? AND expires_at > ?", (lease_id, now)
        ).fetchone()
        return row is not None

    def _put(self, key: str, value: bytes, lease: int | None, revision: int) -> None:
        raw = encode_key(key)
        self._conn.execute(
            "INSERT INTO kv (key, value, mod_revision, lease) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "mod_revision = excluded.mod_revision, lease = excluded.lease",
            (raw, value, revision, lease),
        )
        self._event(revision, PUT, raw, value)

    def _delete(self, raw: bytes, revision: int) -> bool:
        if self._conn.execute("DELETE FROM kv WHERE key = ?", (raw,)).rowcount == 0:
            return False
        self._event(revision, DELETE, raw, b"")
        return True

    def _event(self, revision: int, kind: int, raw: bytes, value: bytes) -> None:
        self._conn.execute(
            "INSERT INTO events (revision, kind, key, value) VALUES (?, ?, ?, ?)",
            (revision, kind, raw, value),
        )

    def _end_lease(self, lease_id: int, revision: int) -> int:
        """Delete the lease and its keys at revision + 1 (if it had keys); the new revision."""
        if self._conn.execute("DELETE FROM leases WHERE id = ?", (lease_id,)).rowcount == 0:
            return revision
        keys = [
            raw
            for (raw,) in self._conn.execute(
                "SELECT key FROM kv WHERE lease = ? ORDER BY key", (lease_id,)
            )
        ]
        if not keys:
            return revision
        for raw in keys:
            self._delete(raw, revision + 1)
        self._set_meta("revision", revision + 1)
        return revision + 1


def _prefix_clause(prefix: str) -> tuple[str, tuple[bytes, ...]]:
    raw = prefix.encode()
    if not raw:
        return "", ()
    end = prefix_end(raw)
    if end is None:
        return "WHERE key >= ?", (raw,)
    return "WHERE key >= ? AND key < ?", (raw, end)


def _entry(row: tuple[bytes, bytes, int, int | None]) -> Entry:
    key, value, version, lease = row
    return Entry(decode_key(key), bytes(value), int(version), lease)


def _event_row(row: tuple[int, int, int, bytes, bytes]) -> EventRow:
    event_id, revision, kind, key, value = row
    event_kind = EventKind.PUT if kind == PUT else EventKind.DELETE
    return EventRow(event_id, WatchEvent(event_kind, decode_key(key), bytes(value), revision))


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise StoreUnavailableError(f"metadata store: {exc}") from exc
