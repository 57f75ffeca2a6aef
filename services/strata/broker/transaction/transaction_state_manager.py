"""``TransactionStateManager``: the transaction metadata of the ``__transaction_state``
partitions this broker leads, their loading, and what an append's acknowledgement does.

Kafka's ``TransactionStateManager`` without the log I/O. It owns:

* the cache: partition -> ``TxnMetadataCacheEntry`` (the coordinator epoch it was loaded at,
  i.e. the partition's leader epoch, and transactional id -> ``TransactionMetadata``);
* loading: ``begin_loading`` marks a partition loading (its ids answer
  COORDINATOR_LOAD_IN_PROGRESS); ``complete_loading`` installs what ``transaction_loader.replay``
  read, unless the load was cancelled meanwhile, and returns the transactions whose markers must
  be sent again (found in PrepareCommit / PrepareAbort); ``unload`` forgets a partition
  (resignation: its ids answer NOT_COORDINATOR);
* ``get_transaction_state``: the lookup every request starts with (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS, unknown id, or the metadata and coordinator epoch);
* ``complete_append``: the rule of Kafka's ``appendTransactionToLog`` callback -- map the log
  append error to a coordinator error (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_
  APPEND), REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
  KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE ->
  UNKNOWN_SERVER_ERROR); on success apply the transit if the partition is still loaded at the
  same coordinator epoch (else NOT_COORDINATOR); on failure drop the pending state, unless the
  caller retries the same append;
* the periodic scans: ``timed_out_transactions`` (Ongoing past ``transaction.timeout.ms``) and
  ``expire_transactional_ids`` (ids idle for ``transactional.id.expiration.ms`` in a state that
  allows it: their tombstones, then ``complete_expiration``).

Invariant: a metadata object is reachable from exactly one partition entry; the cache entry of a
partition is replaced whole on reload. Owned by the coordinator's task; pure (time passed in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from strata.broker.coordinator_partition import partition_for
from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_log import key_to_bytes, value_to_bytes
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

TWO_PHASE_COMMIT_TIMEOUT_MS: Final = 2**31 - 1  # KIP-939: no timeout for such transactions

_APPEND_ERRORS: Final[Mapping[int, ErrorCode]] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}


def coordinator_error_for_append(error: int) -> ErrorCode:
    """The error a client is told when appending to ``__transaction_state`` failed with
    ``error`` (Kafka's mapping; NONE stays NONE)."""
    return _APPEND_ERRORS.get(error, ErrorCode(error))


@dataclass(slots=True)
class TxnMetadataCacheEntry:
    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata]


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TransactionalIdAndProducerIdEpoch:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class ExpiredTransactionalId:
    """A tombstone to append: ``key`` with a null value on ``txn_partition``."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    transit: TxnTransitMetadata
    key: bytes


TransactionStateLookup = ErrorCode | CoordinatorEpochAndTxnMetadata | None
"""An error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), the metadata, or None (unknown)."""


class TransactionStateManager:
    def __init__(self, config: TransactionConfig | None = None) -> None:
        self.config = config if config is not None else TransactionConfig()
        self._cache: dict[int, TxnMetadataCacheEntry] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded

    # ----------------------------------------------------------------- queries
    @property
    def transaction_version_level(self) -> TransactionVersion:
        return self.config.transaction_version

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._cache)

    @property
    def loading_partitions(self) -> Mapping[int, int]:
        return dict(self._loading)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def get_transaction_state(self, transactional_id: str) -> TransactionStateLookup:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        entry = self._cache.get(partition)
        if entry is None:
            return ErrorCode.not_coordinator
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None:
            return None
        return CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata,
    ) -> ErrorCode | CoordinatorEpochAndTxnMetadata:
        """Add a new id's metadata (an existing one wins)."""
        partition = self.partition_for(metadata.transactional_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        entry = self._cache.get(partition)
        if entry is None:
            return ErrorCode.not_coordinator
        existing = entry.metadata_per_transactional_id.setdefault(
            metadata.transactional_id, metadata)
        return CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, existing)

    def transactions(self, partition: int) -> Mapping[str, TransactionMetadata]:
        entry = self._cache.get(partition)
        return {} if entry is None else dict(entry.metadata_per_transactional_id)

    # ----------------------------------------------------------------- records
    def record(self, transactional_id: str, transit: TxnTransitMetadata) -> tuple[bytes, bytes]:
        """The ``__transaction_state`` record (key, value) of a transit, at the value version of
        the broker's ``transaction.version``."""
        return (key_to_bytes(transactional_id),
                value_to_bytes(transit, self.transaction_version_level))

    def check_append(self, transactional_id: str, coordinator_epoch: int) -> ErrorCode:
        """May a transit prepared at ``coordinator_epoch`` still be appended? (Kafka checks
        again right before the append.)"""
        state = self.get_transaction_state(transactional_id)
        if isinstance(state, ErrorCode):
            return state
        if state is None or state.coordinator_epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        return ErrorCode.none

    def complete_append(self, transactional_id: str, coordinator_epoch: int,
                        transit: TxnTransitMetadata, append_error: int,
                        retry_on_error: bool = False) -> ErrorCode:
        """The append of ``transit`` finished with ``append_error`` (NONE = acknowledged);
        apply it or drop the pending state, and return the coordinator's error."""
        error = coordinator_error_for_append(append_error)
        state = self.get_transaction_state(transactional_id)
        if error == ErrorCode.none:
            if isinstance(state, ErrorCode):
                return state
            if state is None or state.coordinator_epoch != coordinator_epoch:
                return ErrorCode.not_coordinator
            state.transaction_metadata.complete_transition_to(transit)
            return ErrorCode.none
        if (isinstance(state, CoordinatorEpochAndTxnMetadata)
                and state.coordinator_epoch == coordinator_epoch and not retry_on_error):
            state.transaction_metadata.abort_pending_transition()
        return error

    # ----------------------------------------------------------------- loading
    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the leader of ``partition`` at ``coordinator_epoch``."""
        self._loading[partition] = coordinator_epoch

    def complete_loading(
        self, partition: int, coordinator_epoch: int, loaded: dict[str, TransactionMetadata],
        now_ms: int,
    ) -> list[PendingCompleteTxn] | None:
        """Install a replayed partition; the transactions to complete (markers to send), or
        None when the load was cancelled or superseded meanwhile."""
        if self._loading.get(partition) != coordinator_epoch:
            return None
        self._cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        pending: list[PendingCompleteTxn] = []
        for transactional_id, metadata in sorted(loaded.items()):
            if metadata.state is TransactionState.PREPARE_COMMIT:
                result = TransactionResult.COMMIT
            elif metadata.state is TransactionState.PREPARE_ABORT:
                result = TransactionResult.ABORT
            else:
                continue
            pending.append(PendingCompleteTxn(
                transactional_id, partition, coordinator_epoch, result, metadata.producer_id,
                metadata.producer_epoch, frozenset(metadata.topic_partitions),
                metadata.prepare_complete(now_ms), metadata.client_transaction_version))
        del self._loading[partition]
        return pending

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition``: forget it. A load in progress is cancelled
        when no epoch is given or it was started at an older epoch."""
        loading_epoch = self._loading.get(partition)
        if loading_epoch is not None and (coordinator_epoch is None
                                          or loading_epoch < coordinator_epoch):
            del self._loading[partition]
        self._cache.pop(partition, None)

    # ----------------------------------------------------------------- periodic scans
    def timed_out_transactions(self, now_ms: int) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions (no write in flight) started more than their timeout ago."""
        timed_out = []
        for entry in self._cache.values():
            for transactional_id, md in sorted(entry.metadata_per_transactional_id.items()):
                if (md.pending_state is None and md.state is TransactionState.ONGOING
                        and md.txn_timeout_ms != TWO_PHASE_COMMIT_TIMEOUT_MS
                        and md.txn_start_timestamp + md.txn_timeout_ms < now_ms):
                    timed_out.append(TransactionalIdAndProducerIdEpoch(
                        transactional_id, md.producer_id, md.producer_epoch))
        return timed_out

    def expire_transactional_ids(self, now_ms: int) -> list[ExpiredTransactionalId]:
        """Prepare Dead for every id idle for ``transactional.id.expiration.ms`` in a state that
        allows expiration; the caller appends each tombstone, then ``complete_expiration``."""
        expired = []
        deadline = now_ms - self.config.transactional_id_expiration_ms
        for partition, entry in sorted(self._cache.items()):
            for transactional_id, md in sorted(entry.metadata_per_transactional_id.items()):
                if (md.pending_state is None and md.state.expiration_allowed
                        and md.txn_last_update_timestamp <= deadline):
                    expired.append(ExpiredTransactionalId(
                        transactional_id, partition, entry.coordinator_epoch, md.prepare_dead(),
                        key_to_bytes(transactional_id)))
        return expired

    def complete_expiration(self, expired: ExpiredTransactionalId, append_error: int) -> bool:
        """The tombstone's append finished: forget the id (True), or keep it as it was."""
        entry = self._cache.get(expired.txn_partition)
        if entry is None:
            return False
        md = entry.metadata_per_transactional_id.get(expired.transactional_id)
        if md is None:
            return False
        if (entry.coordinator_epoch == expired.coordinator_epoch
                and md.pending_state is TransactionState.DEAD
                and md.producer_epoch == expired.transit.producer_epoch
                and append_error == ErrorCode.none):
            del entry.metadata_per_transactional_id[expired.transactional_id]
            return True
        md.abort_pending_transition()
        return False
