"""Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``) and its snapshots.

Owns, per producer id that wrote to the partition, a ``ProducerStateEntry``: the producer epoch,
the metadata of its last five batches (``BatchMetadata``: sequence range, offsets, timestamp)
and the time of its last write; and the ``<20-digit offset>.snapshot`` files in the partition
dir. No transactions yet: every batch with a producer id is treated as idempotent.

Rules (Kafka's ``ProducerAppendInfo``), applied by ``check`` before a leader append:

* a batch equal (epoch, first and last sequence) to one of the producer's last five batches is a
  duplicate: ``check`` returns its ``BatchMetadata`` and the caller answers with the original
  offsets instead of appending again;
* an epoch below the producer's current epoch raises ``InvalidProducerEpochError``;
* a new (bumped) epoch must start at sequence 0, else ``OutOfOrderSequenceError``;
* within an epoch the first sequence must follow the last one (wrapping from 2**31-1 to 0),
  else ``OutOfOrderSequenceError``;
* an unknown producer (or one whose epoch is unknown) may start at any sequence (its earlier
  data may have been deleted by retention).

``update`` applies an appended batch without checks (leader appends after ``check``, follower
appends, recovery replay). ``map_end_offset`` is the offset up to which the state reflects the
log: the state covers every batch below it and none at or above it.

Snapshot file ``<map end offset, 20 digits>.snapshot``, big-endian, Strata's version 1 (Kafka's
layout, extended to keep all five batches of each producer so duplicate detection survives a
restart)::

    0  version           int16    1
    2  crc               uint32   CRC32C of every byte after this field
    6  producer_count    int32
       per producer:
         producer_id     int64
         producer_epoch  int16
         last_timestamp  int64    max timestamp of its last batch (expiration clock)
         batch_count     int8     0..5, oldest first
         per batch:
           last_sequence int32
           last_offset   int64
           offset_delta  int32    last_offset - first offset (= last_sequence - first_sequence)
           timestamp     int64

Crash policy: snapshots are written atomically (``.tmp``, fsync, rename, fsync dir); a stale
``.snapshot.tmp`` is deleted when the manager starts. A snapshot that fails its version, CRC or
length check is corrupt: it is logged, deleted and the next older one is used — never fatal,
since the log replays every batch after the snapshot it loaded (worst case: from the log start).
Snapshots above the log end offset (left by a truncation) or at/below the log start offset are
deleted on (re)load, as in Kafka.

Who mutates: the owning ``Log`` on its owner thread — ``check``/``update`` on append,
``take_snapshot`` on roll and close, ``truncate_*`` on truncation, the loader on startup, the
log manager's periodic ``remove_expired_producers``. Not thread-safe by design (no lock).
"""

from __future__ import annotations

import logging
import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import crc32c as _crc32c

from strata.storage.checkpoints import TMP_FILE_SUFFIX, atomic_write
from strata.storage.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    StorageError,
)
from strata.storage.log_file_names import PRODUCER_SNAPSHOT_FILE_SUFFIX, producer_snapshot_file
from strata.storage.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
)

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_SNAPSHOT_VERSION = 1
INT32_MAX = (1 << 31) - 1

_SNAPSHOT_NAME = re.compile(r"([0-9]{20})" + re.escape(PRODUCER_SNAPSHOT_FILE_SUFFIX))
_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhqb")  # producer_id, producer_epoch, last_timestamp, batch_count
_BATCH = struct.Struct(">iqiq")  # last_sequence, last_offset, offset_delta, timestamp


class CorruptSnapshotError(StorageError):
    """A producer snapshot that fails its version, CRC or length check."""


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` in the sequence space that wraps at 2**31 (Kafka's rule)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: what a duplicate is answered with."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _batch_deque(batches: Iterable[BatchMetadata] = ()) -> deque[BatchMetadata]:
    return deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id: its epoch and its last (up to five) batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = NO_TIMESTAMP
    batch_metadata: deque[BatchMetadata] = field(default_factory=_batch_deque)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one. True if the epoch changed."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batch_metadata.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)


# ------------------------------------------------------------------ snapshot codec
def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Atomically write a snapshot of ``entries`` (layout in the module docstring)."""
    body = bytearray()
    ordered = sorted(entries, key=lambda e: e.producer_id)
    body += _COUNT.pack(len(ordered))
    for e in ordered:
        body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.last_timestamp,
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
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} has unknown version {version}")
    computed = int(_crc32c.crc32c(data[_HEADER.size:]))
    if crc != computed:
        raise CorruptSnapshotError(
            f"snapshot {path} is corrupt: stored crc {crc}, computed {computed}"
        )
    try:
        return _decode_entries(data, _HEADER.size)
    except (struct.error, ValueError) as exc:
        raise CorruptSnapshotError(f"snapshot {path} is malformed: {exc}") from exc


def _decode_entries(data: bytes, pos: int) -> list[ProducerStateEntry]:
    (count,) = _COUNT.unpack_from(data, pos)
    pos += _COUNT.size
    if count < 0:
        raise ValueError(f"negative producer count {count}")
    entries = []
    for _ in range(count):
        producer_id, epoch, last_timestamp, n = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
            raise ValueError(f"producer {producer_id} has {n} batches")
        batches = []
        for _ in range(n):
            batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
            pos += _BATCH.size
        entries.append(ProducerStateEntry(producer_id, epoch, last_timestamp,
                                          _batch_deque(batches)))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes")
    return entries


# ------------------------------------------------------------------------ manager
class ProducerStateManager:
    """Producer id -> ``ProducerStateEntry`` of one partition, with ``.snapshot`` files."""

    def __init__(self, partition_dir: Path, producer_id_expiration_ms: int) -> None:
        self.partition_dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._snapshots: dict[int, Path] = {}
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._scan_snapshot_files()

    def _scan_snapshot_files(self) -> None:
        try:
            children = list(self.partition_dir.iterdir())
        except FileNotFoundError:
            return
        for child in children:
            match = _SNAPSHOT_NAME.fullmatch(child.name)
            if match:
                self._snapshots[int(match.group(1))] = child
            elif child.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX + TMP_FILE_SUFFIX):
                child.unlink(missing_ok=True)  # a snapshot write interrupted by a crash

    # ---------------------------------------------------------------- append path
    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch before a leader append.

        Returns None when the batch may be appended, or the ``BatchMetadata`` of the identical
        earlier batch (a retry) whose offsets the caller answers with. Raises
        ``InvalidProducerEpochError`` / ``OutOfOrderSequenceError`` (rules in the module doc).
        """
        if not header.has_producer_id:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate_batch(header)
            if duplicate is not None:
                return duplicate
        current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {pid} in {self.partition_dir.name} is {epoch}, which is "
                f"smaller than the last seen epoch {current_epoch}"
            )
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {pid} in "
                    f"{self.partition_dir.name}: {epoch} (request epoch), {first_seq} (seq. "
                    f"number), {current_epoch} (current producer epoch)"
                )
            return None
        if entry is None or current_epoch == NO_PRODUCER_EPOCH:
            return None  # no known epoch: any sequence is accepted
        if not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} in {self.partition_dir.name}: "
                f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence "
                f"number)"
            )
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int,
               timestamp: int) -> None:
        """Apply an appended batch (no checks) and move ``map_end_offset`` past it.

        A batch without a producer id only moves ``map_end_offset``.
        """
        if header.has_producer_id:
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            entry.add_batch(header.producer_epoch, header.last_sequence, last_offset,
                            last_offset - first_offset, timestamp)
        self._last_map_offset = last_offset + 1

    def update_map_end_offset(self, offset: int) -> None:
        """The state now reflects the log up to ``offset`` (batches without producer ids)."""
        self._last_map_offset = offset

    # -------------------------------------------------------------------- queries
    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers

    def _is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, entry in self._producers.items()
                   if self._is_producer_expired(now_ms, entry)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    # ------------------------------------------------------------------ snapshots
    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def take_snapshot(self, offset: int | None = None) -> Path | None:
        """Snapshot the state at ``offset`` (default ``map_end_offset``) unless one exists.

        ``offset`` must be >= ``map_end_offset`` (the state holds nothing at or above it);
        ``map_end_offset`` moves up to it. Returns the written file, or None if not new.
        """
        if offset is not None:
            if offset < self._last_map_offset:
                raise ValueError(f"cannot snapshot at {offset}: the producer state already "
                                 f"reflects the log up to {self._last_map_offset}")
            self._last_map_offset = offset
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = producer_snapshot_file(self.partition_dir, self._last_map_offset)
        write_snapshot(path, self._producers.values())
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files below ``offset`` (their segments are gone)."""
        for snap in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snap)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                raise KafkaStorageError(f"cannot delete {path}: {exc}") from exc

    # ------------------------------------------------------------ load / truncate
    def load(self, log_start_offset: int, log_end_offset: int, *,
             now_ms: int | None = None) -> None:
        """Forget the in-memory state and load the newest valid snapshot in range.

        Snapshots above ``log_end_offset`` or at/below ``log_start_offset`` are deleted first;
        a corrupt one is deleted and the next older one tried. Afterwards ``map_end_offset``
        is the loaded snapshot's offset (or ``log_start_offset``): the caller replays the
        batches from there to the log end with ``update``. With ``now_ms``, producers already
        expired are not loaded.
        """
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        self._producers.clear()
        self._load_from_snapshot(log_start_offset, now_ms)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, *,
                            now_ms: int | None = None) -> None:
        """After the log was truncated (or on startup): reload if the state is past the end.

        Deletes out-of-range snapshots; if ``map_end_offset`` differs from ``log_end_offset``
        reloads like ``load`` (the caller replays from ``map_end_offset``), else only notes the
        new log start offset.
        """
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        if log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the log restarts empty at ``offset``."""
        self._producers.clear()
        for snap in list(self._snapshots):
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._last_map_offset = max(self._last_map_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def _delete_snapshots_out_of_range(self, log_start_offset: int, log_end_offset: int) -> None:
        for snap in list(self._snapshots):
            if snap > log_end_offset or snap <= log_start_offset:
                self._remove_and_delete_snapshot(snap)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int | None) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self._last_snap_offset = self._last_map_offset = log_start_offset
                return
            path = self._snapshots[latest]
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as exc:
                logger.warning("skipping producer snapshot: %s", exc)
                self._remove_and_delete_snapshot(latest)
                continue
            for entry in entries:
                if now_ms is None or not self._is_producer_expired(now_ms, entry):
                    self._producers[entry.producer_id] = entry
            self._last_snap_offset = self._last_map_offset = latest
            return

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.partition_dir}, producers={len(self._producers)}, "
                f"map_end_offset={self._last_map_offset}, snapshots={self.snapshot_offsets()})")
