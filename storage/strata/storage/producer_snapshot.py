"""The ``<20-digit offset>.snapshot`` file of a partition's producer state: encode and decode.

Big-endian. Strata's version 2 (Kafka's layout, extended to keep all five batches of each
producer so duplicate detection survives a restart; like Kafka's v1 it carries each producer's
coordinator epoch and ``currentTxnFirstOffset``, so open transactions survive a restart)::

    0  version                   int16    2 (1 is still read: no transaction fields)
    2  crc                       uint32   CRC32C of every byte after this field
    6  producer_count            int32
       per producer:
         producer_id              int64
         producer_epoch           int16
         last_timestamp           int64    max timestamp of its last batch (expiration clock)
         coordinator_epoch        int32    (v2 only; -1 when none)
         current_txn_first_offset int64    (v2 only; -1 when no transaction is open)
         batch_count              int8     0..5, oldest first
         per batch:
           last_sequence          int32
           last_offset            int64
           offset_delta           int32    last_offset - first offset
           timestamp              int64

Writes are atomic (``checkpoints.atomic_write``: ``.tmp``, fsync, rename, fsync dir). A file
that fails its version, CRC or length check raises ``CorruptSnapshotError``; the manager then
deletes it and uses the next older one (never fatal). Pure codec plus the one read and write.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c as _crc32c

from strata.storage.checkpoints import atomic_write
from strata.storage.errors import KafkaStorageError, StorageError
from strata.storage.producer_state_entry import (
    NO_COORDINATOR_EPOCH,
    NO_OFFSET,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    batch_deque,
)

PRODUCER_SNAPSHOT_VERSION = 2
_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY_V1 = struct.Struct(">qhqb")  # producer_id, producer_epoch, last_timestamp, batch_count
_ENTRY_V2 = struct.Struct(">qhqiqb")  # ... coordinator_epoch, current_txn_first_offset, count
_BATCH = struct.Struct(">iqiq")  # last_sequence, last_offset, offset_delta, timestamp


class CorruptSnapshotError(StorageError):
    """A producer snapshot that fails its version, CRC or length check."""


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Atomically write a version 2 snapshot of ``entries``."""
    body = bytearray()
    ordered = sorted(entries, key=lambda e: e.producer_id)
    body += _COUNT.pack(len(ordered))
    for e in ordered:
        body += _ENTRY_V2.pack(e.producer_id, e.producer_epoch, e.last_timestamp,
                               e.coordinator_epoch, e.current_txn_first_offset,
                               len(e.batch_metadata))
        for b in e.batch_metadata:
            body += _BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
    crc = int(_crc32c.crc32c(bytes(body)))
    atomic_write(path, _HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc) + bytes(body))


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Decode a snapshot. Raises ``CorruptSnapshotError`` (also for a vanished file)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise CorruptSnapshotError(f"snapshot {path} vanished") from exc
    except OSError as exc:
        raise KafkaStorageError(f"cannot read {path}: {exc}") from exc
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot {path} is truncated ({len(data)} bytes)")
    version, crc = _HEADER.unpack_from(data, 0)
    if version not in (1, 2):
        raise CorruptSnapshotError(f"snapshot {path} has unknown version {version}")
    computed = int(_crc32c.crc32c(data[_HEADER.size:]))
    if crc != computed:
        raise CorruptSnapshotError(
            f"snapshot {path} is corrupt: stored crc {crc}, computed {computed}"
        )
    try:
        return _decode_entries(data, _HEADER.size, version)
    except (struct.error, ValueError) as exc:
        raise CorruptSnapshotError(f"snapshot {path} is malformed: {exc}") from exc


def _decode_entries(data: bytes, pos: int, version: int) -> list[ProducerStateEntry]:
    (count,) = _COUNT.unpack_from(data, pos)
    pos += _COUNT.size
    if count < 0:
        raise ValueError(f"negative producer count {count}")
    entries = []
    for _ in range(count):
        coordinator_epoch, txn_first = NO_COORDINATOR_EPOCH, NO_OFFSET
        if version == 1:
            producer_id, epoch, last_timestamp, n = _ENTRY_V1.unpack_from(data, pos)
            pos += _ENTRY_V1.size
        else:
            (producer_id, epoch, last_timestamp, coordinator_epoch, txn_first,
             n) = _ENTRY_V2.unpack_from(data, pos)
            pos += _ENTRY_V2.size
        if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
            raise ValueError(f"producer {producer_id} has {n} batches")
        batches = []
        for _ in range(n):
            batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
            pos += _BATCH.size
        entries.append(ProducerStateEntry(producer_id, epoch, last_timestamp,
                                          batch_deque(batches), coordinator_epoch, txn_first))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes")
    return entries
