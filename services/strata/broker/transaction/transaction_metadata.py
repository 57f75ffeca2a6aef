"""``TransactionMetadata``: one transactional id's producer, epoch and open transaction.

Kafka's ``TransactionMetadata`` and ``TxnTransitMetadata``. Every change is two steps, because
the ``__transaction_state`` log is the coordinator's memory: a ``prepare_*`` method checks the
move (``transaction_state.VALID_PREVIOUS_STATES``), records it as the *pending state* and
returns an immutable ``TxnTransitMetadata`` -- the record value to append. Only when the
append is acknowledged does ``complete_transition_to`` apply it; a failed append calls
``abort_pending_transition`` instead. While a state is pending every request on the id is
answered CONCURRENT_TRANSACTIONS, so at most one change is in flight per id.

Fields (Kafka's): ``producer_id`` and ``producer_epoch`` in use; ``prev_producer_id`` (the id
before the last rotation, so a retry across it is recognised), ``next_producer_id`` (transactions
v2: the id the producer moves to once the transaction being ended completes, when its epoch is
exhausted); ``last_producer_epoch`` (the epoch before the last bump: KIP-360 retries; not in the
log, -1 after a load); ``txn_timeout_ms``; ``state``; ``topic_partitions`` of the open
transaction; ``txn_start_timestamp`` (first partition added, -1 when none) and
``txn_last_update_timestamp`` (every change; expiration); ``client_transaction_version`` (the
``TransactionVersion`` of the client's last transition).

Invariants: an epoch never exceeds ``Short.MAX_VALUE`` (32767); a client is never handed an
epoch above 32766, so the coordinator can always fence it; epochs only grow for one producer
id; a new producer id starts at epoch 0. ``complete_transition_to`` refuses a transit that
breaks them with ``IllegalTransactionTransition`` (a coordinator bug, never a client's error).

Owned by the coordinator of the id's ``__transaction_state`` partition; single-threaded (the
event loop), so Kafka's per-metadata lock has no equivalent. Pure: time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final, NoReturn

from strata.broker.transaction.transaction_state import TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

TopicPartition = tuple[str, int]

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_PRODUCER_EPOCH: Final = 32767  # Short.MAX_VALUE
NO_TIMESTAMP: Final = -1

_EMPTY, _ONGOING = TransactionState.EMPTY, TransactionState.ONGOING
_PC, _PA = TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT
_CC, _CA = TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No further epoch may be handed to a client (``epoch >= Short.MAX_VALUE - 1``): the last
    one is kept so the coordinator can always fence."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


class IllegalTransactionTransition(RuntimeError):
    """A move the state machine does not allow: a coordinator bug, never a client's error."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of one transition: what is appended to ``__transaction_state`` and, once
    acknowledged, becomes the metadata."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: TransactionVersion


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = NO_TIMESTAMP
    txn_last_update_timestamp: int = NO_TIMESTAMP
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0
    pending_state: TransactionState | None = None
    """The state a written-but-unacknowledged transit moves to (None: nothing in flight)."""
    has_failed_epoch_fence: bool = False
    """A fencing bump whose append failed (transactions v1): the next fence reuses its epoch."""

    # ------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_ONGOING, _PA, _PC)

    def snapshot(self) -> TxnTransitMetadata:
        """The current metadata as a transit (no pending state set): tests, DescribeTransactions."""
        return TxnTransitMetadata(
            self.producer_id, self.prev_producer_id, self.next_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state,
            frozenset(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp, self.client_transaction_version)

    # ----------------------------------------------------------------- prepare
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """PrepareEpochFence: bump the epoch to fence the current producer before aborting its
        transaction (InitProducerId from a new producer, or a timeout). Never written as such:
        the abort that follows replaces it."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalTransactionTransition(
                f"cannot fence {self.transactional_id}: epoch {self.producer_epoch} would overflow")
        bumped = (self.producer_epoch if self.has_failed_epoch_fence
                  else self.producer_epoch + 1)
        return self._prepare(TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int,
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on an id with no open transaction: Empty at the next epoch.

        Without an expected epoch (a new producer) the epoch is bumped and the last epoch
        forgotten, fencing every older producer. With one (KIP-360: a producer recovering
        itself): the current epoch (or none yet) is bumped, remembering it as the last; the
        last epoch is a retry of a bump that succeeded and gets the current epoch again; any
        other is PRODUCER_FENCED.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionTransition(
                f"no producer epoch left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif (self.producer_epoch == NO_PRODUCER_EPOCH
              or expected_producer_epoch == self.producer_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(_EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
                             txn_start_timestamp=NO_TIMESTAMP, txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int,
        record_last_epoch: bool,
    ) -> TxnTransitMetadata:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransactionTransition(
                "cannot rotate producer ids while a transaction is still pending")
        return self._prepare(
            _EMPTY, producer_id=new_producer_id, producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
            txn_start_timestamp=NO_TIMESTAMP, txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now_ms: int,
        client_transaction_version: TransactionVersion,
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with ``added``; a new transaction
        starts now."""
        start = (now_ms if self.state in (_EMPTY, _CA, _CC) else self.txn_start_timestamp)
        return self._prepare(
            _ONGOING, topic_partitions=frozenset(self.topic_partitions) | added,
            txn_start_timestamp=start, txn_last_update_timestamp=now_ms,
            client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(
        self, new_state: TransactionState, client_transaction_version: TransactionVersion,
        next_producer_id: int, now_ms: int, no_partition_added: bool,
    ) -> TxnTransitMetadata:
        """EndTxn (or a coordinator abort): PrepareCommit / PrepareAbort. Transactions v2 bump
        the epoch here (the caller rotated to ``next_producer_id`` first if the epoch is
        exhausted); a v2 abort with no transaction open starts its transaction now."""
        if client_transaction_version.supports_epoch_bump:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state, producer_epoch=epoch, last_producer_epoch=last,
            next_producer_id=next_producer_id,
            txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
            txn_last_update_timestamp=now_ms,
            client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every marker written: CompleteCommit / CompleteAbort. Transactions v2 with an
        exhausted epoch move to ``next_producer_id`` at epoch 0 here; the last epoch stays the
        one the client last saw."""
        self.has_failed_epoch_fence = False
        new_state = _CC if self.state is _PC else _CA
        if (self.client_transaction_version.supports_epoch_bump
                and self.next_producer_id != NO_PRODUCER_ID):
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(new_state, producer_id=producer_id, producer_epoch=epoch,
                             next_producer_id=NO_PRODUCER_ID, topic_partitions=frozenset(),
                             txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """Expiration: Dead (written as a tombstone, then the id is forgotten)."""
        return self._prepare(TransactionState.DEAD, topic_partitions=frozenset())

    def _prepare(self, new_state: TransactionState, **changes: Any) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: preparing {new_state} while {self.pending_state} "
                "is pending")
        transit = replace(self.snapshot(), txn_state=new_state,
                          prev_producer_id=self.producer_id, **changes)
        if transit.producer_id < 0:
            raise IllegalTransactionTransition(f"illegal new producer id {transit.producer_id}")
        if new_state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransactionTransition(
                f"illegal new producer epoch {transit.producer_epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalTransactionTransition(
                f"{self.transactional_id}: {self.state} -> {new_state} is not a valid transition")
        self.pending_state = new_state
        return transit

    # ---------------------------------------------------------------- complete
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once its append is acknowledged (Kafka's checks: the pending state
        matches; epochs move by Kafka's rules; partitions only grow while Ongoing)."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.txn_state:
            self._fail(transit, f"pending state is {to_state}")
        if to_state is _EMPTY:
            if ((self.producer_epoch != transit.producer_epoch
                 and not self._valid_producer_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != NO_TIMESTAMP):
                self._fail(transit, "not a valid InitProducerId transition")
        elif to_state is _ONGOING:
            if (not self._valid_producer_epoch(transit)
                    or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit, "not a valid AddPartitions transition")
        elif to_state in (_PA, _PC):
            empty_abort = (to_state is _PA
                           and transit.client_transaction_version.supports_epoch_bump
                           and self.state in (_EMPTY, _CC, _CA))
            if (not self._valid_producer_epoch(transit)
                    or frozenset(self.topic_partitions) != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or not (empty_abort
                            or self.txn_start_timestamp == transit.txn_start_timestamp)):
                self._fail(transit, "not a valid EndTxn transition")
        elif to_state in (_CA, _CC):
            if (not self._valid_producer_epoch(transit)
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == NO_TIMESTAMP):
                self._fail(transit, "not a valid completion")
        else:  # PrepareEpochFence is replaced by the abort; Dead removes the id instead.
            self._fail(transit, f"{to_state} is never completed")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def abort_pending_transition(self) -> None:
        """The append of the pending transit failed: nothing changed."""
        self.pending_state = None

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        v2 = transit.client_transaction_version.supports_epoch_bump
        if v2 and transit.txn_state in (_CC, _CA) and transit.producer_epoch == 0:
            # Rotation at completion: the new id is at epoch 0; the old one was ours.
            return (transit.last_producer_epoch == self.last_producer_epoch
                    and transit.prev_producer_id == self.producer_id)
        if v2 and transit.txn_state in (_PC, _PA):
            # The bump of transactions v2: the transit's last epoch is our current one.
            return (transit.last_producer_epoch == self.producer_epoch
                    and transit.producer_id == self.producer_id)
        return (transit.producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id)

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return (transit.producer_epoch == self.producer_epoch + 1
                or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))

    def _fail(self, transit: TxnTransitMetadata, why: str) -> NoReturn:
        raise IllegalTransactionTransition(
            f"{self.transactional_id}: cannot complete {self.state} -> {transit} ({why})")
