"""Producer state of one partition (Kafka's ``ProducerStateManager`` and ``ProducerAppendInfo``):
idempotence, transactions, the first unstable offset, and the ``.snapshot`` files.

Owns, per producer id that wrote to the partition, a ``ProducerStateEntry``
(``producer_state_entry``: epoch, last five batches, last write time, coordinator epoch, open
transaction); the open transactions in first-offset order; the completed transactions whose
marker is not yet below the high watermark (Kafka's ``unreplicatedTxns``); and the snapshot
files (``producer_snapshot``).

Rules for a client's data batch (``check``, before a leader append):

* a batch equal (epoch, first and last sequence) to one of the producer's last five batches is a
  duplicate: ``check`` returns its ``BatchMetadata`` and the caller answers with the original
  offsets instead of appending again;
* an epoch below the producer's current epoch raises ``InvalidProducerEpochError``;
* a new (bumped) epoch must start at sequence 0, else ``OutOfOrderSequenceError``;
* within an epoch the first sequence must follow the last one (wrapping from 2**31-1 to 0),
  else ``OutOfOrderSequenceError``;
* an unknown producer (or one whose epoch is unknown) may start at any sequence (its earlier
  data may have been deleted by retention);
* a non-transactional batch while the producer's transaction is open raises
  ``InvalidTxnStateError``;
* with transaction verification (KIP-890, ``verification_state``): a transactional batch of a
  producer with no open transaction here needs its verification's guard, else
  ``InvalidTxnStateError``; while a verification is pending, a sequence above its lowest is
  ``OutOfOrderSequenceError``. A transactional batch or marker appended ends the verification.

Rules for a transaction marker from the coordinator (``check_marker``): an epoch below the
producer's raises ``InvalidProducerEpochError``, a coordinator epoch below the last one seen
``TransactionCoordinatorFencedError``. A marker of a producer with no open transaction is
accepted and completes nothing (Kafka's rule: an empty transaction touches no index).

``update`` / ``update_marker`` apply an appended batch without checks (leader appends after the
checks, follower appends, recovery replay). A transactional data batch opens the producer's
transaction at its first offset if none is open; a marker completes it and returns the
``CompletedTxn`` with the last stable offset at that moment (what ``.txnindex`` records).
``map_end_offset`` is the offset up to which the state reflects the log.

``first_unstable_offset``: the smallest first offset among open transactions and completed ones
whose marker is at or above the high watermark (``on_high_watermark_updated`` forgets those
below it), or None. Open transactions begin in offset order, so the first one is the oldest.

Crash policy: snapshots are written atomically; a stale ``.snapshot.tmp`` is deleted when the
manager starts. A corrupt snapshot is logged, deleted and the next older one is used - never
fatal, since the log replays every batch after the snapshot it loaded (worst case: from the log
start). Snapshots above the log end offset (left by a truncation) or at/below the log start
offset are deleted on (re)load, as in Kafka. Producers with an open transaction never expire.

Who mutates: the owning ``Log`` on its owner thread - ``check``/``update`` on append,
``take_snapshot`` on roll and close, ``truncate_*`` on truncation, the loader on startup, the
log manager's periodic ``remove_expired_producers``. Not thread-safe by design (no lock).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from strata.storage.checkpoints import TMP_FILE_SUFFIX
from strata.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from strata.storage.log_file_names import PRODUCER_SNAPSHOT_FILE_SUFFIX, producer_snapshot_file
from strata.storage.producer_snapshot import (
    PRODUCER_SNAPSHOT_VERSION,
    CorruptSnapshotError,
    read_snapshot,
    write_snapshot,
)
from strata.storage.producer_state_entry import (
    INT32_MAX,
    NO_OFFSET,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    CompletedTxn,
    ProducerStateEntry,
    decrement_sequence,
    in_sequence,
)
from strata.storage.record_batch import NO_PRODUCER_EPOCH, TRANSACTIONAL_FLAG_MASK, BatchHeader
from strata.storage.records import EndTransactionMarker
from strata.storage.verification_state import SENTINEL_GUARD, VerificationState

__all__ = [
    "INT32_MAX", "NUM_BATCHES_TO_RETAIN", "PRODUCER_SNAPSHOT_VERSION", "BatchMetadata",
    "CompletedTxn", "CorruptSnapshotError", "ProducerStateEntry", "ProducerStateManager",
    "decrement_sequence", "in_sequence", "read_snapshot", "write_snapshot",
]

logger = logging.getLogger(__name__)

_SNAPSHOT_NAME = re.compile(r"([0-9]{20})" + re.escape(PRODUCER_SNAPSHOT_FILE_SUFFIX))


# ------------------------------------------------------------------------ manager
class ProducerStateManager:
    """Producer id -> ``ProducerStateEntry`` of one partition, with ``.snapshot`` files."""

    def __init__(self, partition_dir: Path, producer_id_expiration_ms: int) -> None:
        self.partition_dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction, in first-offset order
        self._ongoing: dict[int, int] = {}
        self._unreplicated: list[CompletedTxn] = []  # markers not yet below the HW
        self._verification: dict[int, VerificationState] = {}  # KIP-890 verifications
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
    def check(self, header: BatchHeader, *, client: bool = True,
              verification_guard: int | None = None) -> BatchMetadata | None:
        """Validate a data batch before a leader append.

        Returns None when the batch may be appended, or the ``BatchMetadata`` of the identical
        earlier batch (a retry) whose offsets the caller answers with. Raises
        ``InvalidProducerEpochError`` / ``OutOfOrderSequenceError`` / ``InvalidTxnStateError``
        (rules in the module doc). A coordinator's data batch (``client`` False: the group
        coordinator's transactional offset commits) gets the epoch and transaction checks
        only, no duplicate or sequence check (Kafka checks sequences for ``AppendOrigin.CLIENT``
        only). ``verification_guard`` (transaction verification in use, KIP-890): a
        transactional batch of a producer with no open transaction here needs the guard its
        verification was given (``verification_state``), else ``InvalidTxnStateError``.
        """
        if not header.has_producer_id:
            return None
        pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
        entry = self._producers.get(pid)
        if client and entry is not None:
            duplicate = entry.find_duplicate_batch(header)
            if duplicate is not None:
                return duplicate
        verification = self._verification.get(pid)
        if (verification_guard is not None and header.attributes & TRANSACTIONAL_FLAG_MASK
                and (entry is None or entry.current_txn_first_offset < 0)
                and (verification is None or not verification.verifies(verification_guard))):
            raise InvalidTxnStateError(
                f"record of producer {pid} in {self.partition_dir.name} was not part of an "
                f"ongoing transaction")
        if client and verification is not None and first_seq > verification.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} in {self.partition_dir.name}: "
                f"{first_seq} (incoming seq. number), {verification.lowest_sequence} (earliest "
                f"seen sequence)")
        if entry is None:
            return None  # unknown producer: any epoch, any sequence
        current_epoch = entry.producer_epoch
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {pid} in {self.partition_dir.name} is {epoch}, which is "
                f"smaller than the last seen epoch {current_epoch}"
            )
        if client and epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {pid} in "
                    f"{self.partition_dir.name}: {epoch} (request epoch), {first_seq} (seq. "
                    f"number), {current_epoch} (current producer epoch)"
                )
        elif (client and current_epoch != NO_PRODUCER_EPOCH
              and not in_sequence(entry.last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} in {self.partition_dir.name}: "
                f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence "
                f"number)"
            )
        if entry.current_txn_first_offset >= 0 and not header.attributes & TRANSACTIONAL_FLAG_MASK:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {pid} in "
                f"{self.partition_dir.name}: its transaction from offset "
                f"{entry.current_txn_first_offset} is still open"
            )
        return None

    def check_marker(self, header: BatchHeader, marker: EndTransactionMarker) -> None:
        """Validate a coordinator's transaction marker before a leader append: a stale
        producer epoch raises ``InvalidProducerEpochError``, a stale coordinator epoch
        ``TransactionCoordinatorFencedError`` (Kafka's ``appendEndTxnMarker`` checks)."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        pid = header.producer_id
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"epoch {header.producer_epoch} of the transaction marker of producer {pid} in "
                f"{self.partition_dir.name} is smaller than the last seen epoch "
                f"{entry.producer_epoch}"
            )
        if entry.coordinator_epoch > marker.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"invalid coordinator epoch for producer {pid} in {self.partition_dir.name}: "
                f"{marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)"
            )

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
            if header.attributes & TRANSACTIONAL_FLAG_MASK:
                self._verification.pop(header.producer_id, None)  # the first offset guards now
                if entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = first_offset
                    self._ongoing[header.producer_id] = first_offset
        self._last_map_offset = last_offset + 1

    def update_marker(self, header: BatchHeader, offset: int,
                      marker: EndTransactionMarker) -> CompletedTxn | None:
        """Apply an appended ABORT/COMMIT marker at ``offset`` (no checks). Returns the
        transaction it completed, with the last stable offset right after it, or None for a
        producer with no open transaction."""
        pid = header.producer_id
        self._verification.pop(pid, None)  # a verification from before the marker is stale
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, offset,
                                     marker.is_abort, self._lso_after(pid, offset))
            self._ongoing.pop(pid, None)
            self._unreplicated.append(completed)
        entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.current_txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        self._last_map_offset = offset + 1
        return completed

    def _lso_after(self, producer_id: int, marker_offset: int) -> int:
        """Kafka's ``lastStableOffset(completedTxn)``: the first offset of the earliest open
        transaction of another producer, else the marker's offset + 1."""
        for pid, first in self._ongoing.items():
            if pid != producer_id:
                return first
        return marker_offset + 1

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

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """Producer id -> first offset of its open transaction, oldest first."""
        return MappingProxyType(self._ongoing)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction not both decided and replicated, or None."""
        first = next(iter(self._ongoing.values()), None)
        for txn in self._unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below the high watermark."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated
                                  if t.last_offset >= high_watermark]

    def _is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset < 0
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, entry in self._producers.items()
                   if self._is_producer_expired(now_ms, entry)]
        for pid in expired:
            del self._producers[pid]
        self._verification = {pid: v for pid, v in self._verification.items()
                              if now_ms - v.timestamp_ms < self.producer_id_expiration_ms}
        return len(expired)

    # ------------------------------------------------------- transaction verification
    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int) -> int:
        """The guard a verification of ``producer_id``'s transaction on this partition carries
        to its append (``check``); ``SENTINEL_GUARD`` when the producer's transaction is
        already open here (nothing to verify). Kafka's ``maybeStartTransactionVerification``."""
        entry = self._producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0:
            return SENTINEL_GUARD
        state = self._verification.get(producer_id)
        if state is None:
            state = self._verification[producer_id] = VerificationState(now_ms, sequence, epoch)
        else:
            state.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return state.guard

    def verification_state(self, producer_id: int) -> VerificationState | None:
        return self._verification.get(producer_id)

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
        self._clear()
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
            self._clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the log restarts empty at ``offset``."""
        self._clear()
        for snap in list(self._snapshots):
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated = []

    def delete_snapshots_above(self, offset: int) -> None:
        """Delete snapshot files above ``offset`` (the log after it is being recovered)."""
        for snap in [o for o in self._snapshots if o > offset]:
            self._remove_and_delete_snapshot(snap)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated
                                  if t.last_offset >= log_start_offset]
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
            open_txns = sorted((e.current_txn_first_offset, e.producer_id)
                               for e in self._producers.values() if e.in_transaction)
            self._ongoing = {pid: first for first, pid in open_txns}
            self._last_snap_offset = self._last_map_offset = latest
            return

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.partition_dir}, producers={len(self._producers)}, "
                f"map_end_offset={self._last_map_offset}, snapshots={self.snapshot_offsets()})")
