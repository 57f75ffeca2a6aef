"""``<base>.txnindex``: the aborted transactions whose abort marker lies in one segment (Kafka's
``TransactionIndex``, ``AbortedTxn`` and ``TxnIndexSearchResult``).

File format (Kafka's, big-endian), a run of fixed 34-byte entries in marker-offset order::

    0   version             int16   0
    2   producer_id         int64
    10  first_offset        int64   first data offset of the aborted transaction
    18  last_offset         int64   offset of its ABORT marker
    26  last_stable_offset  int64   the LSO right after the marker was appended

The file exists only once a segment holds an abort marker of a non-empty transaction (most
segments have none). It keeps no descriptor: an append opens, writes and closes (aborts are
rare); ``flush`` fsyncs only when something was appended since the last one. The entries are
read from the file once, on first use, and then kept in memory with the file.

Invariants: ``last_offset`` strictly increases from entry to entry and is >= the segment's base
offset; the file length is a multiple of 34. A file that breaks either fails ``sanity_check``
(``CorruptIndexError``): the loader recovers the segment, and the producer-state replay writes
the index again (``log_loader``). The file's contents are a function of the log: the loader
rebuilds exactly the same entries from the batches.

Lookups (``collect_aborted_txns``) are Kafka's: every entry whose range [first_offset,
last_offset] meets [fetch_offset, upper_bound_offset), and the search is complete (later
segments need not be read) once an entry's ``last_stable_offset`` reaches the upper bound.

Threads: appends, truncation and renames on the log's owner thread; reads from any thread (the
entry list is replaced, never mutated in place, so a reader's list stays consistent).
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from strata.storage.abstract_index import CorruptIndexError
from strata.storage.errors import KafkaStorageError

TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, first data offset, abort marker offset and the
    last stable offset after the marker (-1 where not known: the cleaner's own scan)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int = -1


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    is_complete: bool


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(TXN_INDEX_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)


def decode_entries(data: bytes, path: Path | str = "<bytes>") -> list[AbortedTxn]:
    """Entries of a ``.txnindex``; raises ``CorruptIndexError`` for a torn or unknown entry."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"transaction index {path} has {len(data)} bytes, not a "
                                f"multiple of {ENTRY_SIZE}")
    out: list[AbortedTxn] = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(f"transaction index {path} has an entry of unknown version "
                                    f"{version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``start_offset``."""

    def __init__(self, start_offset: int, path: Path) -> None:
        self.start_offset = start_offset
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # None: not read from the file yet
        self._dirty = False

    # ------------------------------------------------------------------ reads
    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            except OSError as exc:
                raise KafkaStorageError(f"cannot read {self.path}: {exc}") from exc
            entries = self._entries = decode_entries(data, self.path)
        return entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    @property
    def last_offset(self) -> int | None:
        entries = self._load()
        return entries[-1].last_offset if entries else None

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [``fetch_offset``, ``upper_bound_offset``); complete once one
        has ``last_stable_offset >= upper_bound_offset`` (Kafka's rule)."""
        found: list[AbortedTxn] = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` for a torn file or an entry out of order or below the
        segment's base offset."""
        self._entries = None
        previous = self.start_offset - 1
        for txn in self._load():
            if txn.last_offset <= previous:
                self._entries = None
                raise CorruptIndexError(
                    f"last offset {txn.last_offset} of an aborted transaction in {self.path} is "
                    f"not above {previous} (segment base {self.start_offset})")
            previous = txn.last_offset

    # ----------------------------------------------------------------- writes
    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"the last offset of appended transactions must increase: "
                             f"{txn.last_offset} after {entries[-1].last_offset} in {self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, encode_entry(txn))
            finally:
                os.close(fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot append to {self.path}: {exc}") from exc
        self._entries = [*entries, txn]
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose abort marker is at or above ``offset``."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._rewrite(keep)

    def reset(self) -> None:
        """Forget every entry and remove the file (the segment is being recovered)."""
        self._entries = []
        self._dirty = False
        self.path.unlink(missing_ok=True)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        try:
            if entries:
                os.truncate(self.path, len(entries) * ENTRY_SIZE)
                self._dirty = True
            else:
                self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot truncate {self.path}: {exc}") from exc
        self._entries = entries

    # -------------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """fsync the file if anything was appended since the last flush. Raises ``OSError``."""
        if not self._dirty:
            return
        self._dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename_to(self, path: Path) -> None:
        """Rename the file if it exists (``.deleted``, ``.cleaned``, ``.swap``)."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path})"
