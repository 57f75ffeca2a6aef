"""The SQLite file's layout and how a connection to it is opened.

Tables (schema version 1, kept in ``meta`` so a later Strata can upgrade the file)::

    meta(name TEXT PRIMARY KEY, value INTEGER)
        'schema_version'    1
        'revision'          store revision: +1 per write transaction that changes something
        'compact_revision'  events with revision <= this are gone (0: none compacted)
        'compact_event_id'  the largest event id compaction deleted (a poller behind it lost
                            events and fails its watches with CompactedError)
    kv(key BLOB PRIMARY KEY, value BLOB, mod_revision INTEGER, lease INTEGER NULL)
        key is the UTF-8 key; mod_revision is Entry.version
    leases(id INTEGER PRIMARY KEY AUTOINCREMENT, ttl REAL, expires_at REAL)
        expires_at is wall-clock seconds (the clock every process of the host shares); ids are
        never reused
    events(id INTEGER PRIMARY KEY AUTOINCREMENT, revision INTEGER, kind INTEGER, key BLOB,
           value BLOB)
        one row per changed key, in commit order (writers are serialised by BEGIN IMMEDIATE,
        so ids become visible in increasing order and a reader polling ``id > last`` never
        skips one); kind 0 = PUT, 1 = DELETE

Connections: WAL journal (readers never block the writer), ``synchronous=FULL`` (a committed
write survives power loss), a busy timeout for the write lock, autocommit mode (each statement
outside an explicit ``BEGIN`` is its own short transaction: no long-lived readers that would
stall WAL checkpoints). Same host only: WAL's shared memory does not work over NFS.
"""

from __future__ import annotations

import sqlite3
import time

from .errors import MetadataStoreError

SCHEMA_VERSION = 1
PUT, DELETE = 0, 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kv (
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    mod_revision INTEGER NOT NULL,
    lease INTEGER
);
CREATE INDEX IF NOT EXISTS kv_lease ON kv (lease) WHERE lease IS NOT NULL;
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ttl REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expires_at);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    revision INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_revision ON events (revision);
"""


def connect(path: str, *, busy_timeout_s: float) -> sqlite3.Connection:
    """Open (creating if needed) the store file and check its schema version."""
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
    try:
        _enable_wal(conn, busy_timeout_s)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        # One statement at a time: executescript() would COMMIT the BEGIN IMMEDIATE.
        for statement in _DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?), "
            "('revision', 0), ('compact_revision', 0), ('compact_event_id', 0)",
            (SCHEMA_VERSION,),
        )
        (version,) = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    if version != SCHEMA_VERSION:
        conn.close()
        raise MetadataStoreError(
            f"{path}: metadata schema version {version}, this Strata reads {SCHEMA_VERSION}"
        )
    return conn


def _enable_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch the file to WAL (persistent in the file) unless it already is. Changing the
    journal mode needs the database to itself, and SQLite answers "database is locked" at once
    rather than through the busy timeout while another process is in a transaction, so
    several processes opening a new store together retry here until ``busy_timeout_s``."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)  # another process holds the lock for one short transaction
