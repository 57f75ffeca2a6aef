"""``TransactionCoordinator``: the decisions of Kafka's transaction coordinator, without I/O.

Kafka's ``TransactionCoordinator``. Each request entry point checks the request against the
cached metadata (``TransactionStateManager``) and returns a ``Decision``:

* an ``Answer`` -- reply now with this error (and producer id / epoch); or
* a ``WriteTxnLog`` -- append ``key``/``value`` to ``__transaction_state`` partition
  ``txn_partition`` (acks=all), then call ``complete_write(write, append_error, now_ms)``
  exactly once, whatever happened, and do what its ``WriteOutcome`` says: send ``answer`` to
  the client that is waiting (``purpose`` says which one, if any), hand ``markers`` to the
  ``TransactionMarkerBook``, or (``retry``) append the same record again later.

Until ``complete_write`` is called the id has a pending state, so every other request on it is
answered CONCURRENT_TRANSACTIONS: the log, not memory, decides what happened. The flow of one
transaction::

    InitProducerId   -> write Empty (epoch + 1)                    -> answer id and epoch
    AddPartitions    -> write Ongoing (partitions)                 -> answer NONE
    EndTxn           -> write PrepareCommit/PrepareAbort           -> answer, send markers
    markers written  -> write_txn_completion: CompleteCommit/Abort -> (nobody waits)

The rules per state are the table of ``transaction_state``; the error codes are Kafka's. The
fencing error of the current protocol is PRODUCER_FENCED; ``fenced_error_for_version`` turns it
into INVALID_PRODUCER_EPOCH for clients older than InitProducerId v4, EndTxn v2,
AddPartitionsToTxn v2 and AddOffsetsToTxn v2 (the handler's last step).

Transactions v2 (``client_transaction_version`` TV_2, from EndTxn v5+ / AddPartitionsToTxn
v4+): EndTxn bumps the epoch and is answered with the producer id and epoch to use next (a new
producer id at epoch 0 once the epoch is exhausted); a retried EndTxn is recognised by its epoch
(the one before the bump). Transactions v1 answer EndTxn with -1 / -1.

Producer ids come from ``producer_id_allocator``, a plain callable: it may raise
``ProducerIdUnavailableError`` (Kafka's RPC id manager throws COORDINATOR_LOAD_IN_PROGRESS while
it waits for a block), which is answered with its error code. Requests the coordinator starts
itself (proactive abort of timed-out transactions, fencing by InitProducerId) run at the
broker's ``transaction.version``. Owned by the broker's event loop; pure (time passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from strata.broker.transaction.transaction_decision import (
    Answer,
    Decision,
    ProducerIdAndEpoch,
    ProducerIdUnavailableError,
    Purpose,
    WriteOutcome,
    WriteTxnLog,
)
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionStateManager,
)
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

OFFSETS_TOPIC: Final = "__consumer_offsets"

_EMPTY, _ONGOING = TransactionState.EMPTY, TransactionState.ONGOING
_PC, _PA = TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT
_CC, _CA = TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT
_FENCE = TransactionState.PREPARE_EPOCH_FENCE
_COMMIT, _ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


class TransactionCoordinator:
    def __init__(self, state_manager: TransactionStateManager,
                 producer_id_allocator: Callable[[], int]) -> None:
        self.state_manager = state_manager
        self._allocate = producer_id_allocator

    # ------------------------------------------------------------ InitProducerId
    def handle_init_producer_id(
        self, transactional_id: str | None, txn_timeout_ms: int,
        expected: ProducerIdAndEpoch | None, now_ms: int, *, enable_two_pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> Decision:
        """InitProducerId: a new producer (``expected`` None) or one recovering its id and
        epoch (KIP-360, v3+). v6's two-phase commit (KIP-939) is answered as by a Kafka broker
        with ``transaction.two.phase.commit.enable=false``: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        and ``keep_prepared_txn`` UNSUPPORTED_VERSION."""
        if transactional_id is None:
            producer_id = self._new_producer_id()
            if isinstance(producer_id, ErrorCode):
                return Answer(producer_id)
            return Answer(ErrorCode.none, producer_id, 0)
        if transactional_id == "":
            return Answer(ErrorCode.invalid_request)
        if enable_two_pc:
            return Answer(ErrorCode.transactional_id_authorization_failed)
        if keep_prepared_txn:
            return Answer(ErrorCode.unsupported_version)
        if not self.state_manager.config.validate_transaction_timeout_ms(txn_timeout_ms):
            return Answer(ErrorCode.invalid_transaction_timeout)
        state = self.state_manager.get_transaction_state(transactional_id)
        if state is None:
            producer_id = self._new_producer_id()
            if isinstance(producer_id, ErrorCode):
                return Answer(producer_id)
            state = self.state_manager.put_transaction_state_if_not_exists(TransactionMetadata(
                transactional_id, producer_id, txn_timeout_ms=txn_timeout_ms,
                txn_last_update_timestamp=now_ms))
        if isinstance(state, ErrorCode):
            return Answer(state)
        md = state.transaction_metadata
        if md.pending_transition_in_progress:
            return Answer(ErrorCode.concurrent_transactions)
        if expected is not None and not _is_valid_producer_id(md, expected):
            return Answer(ErrorCode.producer_fenced)
        if md.state in (_PC, _PA):
            return Answer(ErrorCode.concurrent_transactions)
        if md.state is _ONGOING:
            # Fence the open transaction's producer and abort it; the client retries.
            fence = md.prepare_fence_producer_epoch()
            decision = self._end_transaction(
                transactional_id, fence.producer_id, fence.producer_epoch, _ABORT,
                is_from_client=False,
                client_version=self.state_manager.transaction_version_level,
                now_ms=now_ms, purpose=Purpose.FENCE)
            if isinstance(decision, Answer) and md.pending_state is _FENCE:
                md.abort_pending_transition()
            return decision
        if md.state not in (_EMPTY, _CC, _CA):
            raise RuntimeError(f"{transactional_id} found in {md.state}: never a settled state")
        transit: TxnTransitMetadata | ErrorCode
        if md.is_producer_epoch_exhausted and (expected is None
                                                or expected.epoch == md.producer_epoch):
            producer_id = self._new_producer_id()
            if isinstance(producer_id, ErrorCode):
                return Answer(producer_id)
            transit = md.prepare_producer_id_rotation(producer_id, txn_timeout_ms, now_ms,
                                                      record_last_epoch=expected is not None)
        else:
            transit = md.prepare_increment_producer_epoch(
                txn_timeout_ms, expected.epoch if expected is not None else None, now_ms)
        if isinstance(transit, ErrorCode):
            return Answer(transit)
        return self._write(transactional_id, state, transit, Purpose.INIT_PRODUCER_ID)

    # ------------------------------------------------------------ AddPartitionsToTxn
    def handle_add_partitions_to_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition], client_version: TransactionVersion, now_ms: int,
    ) -> Decision:
        """AddPartitionsToTxn v1-v3 (a client), v4+ not verify-only (a leader adding for a
        transactions v2 client), and AddOffsetsToTxn (``handle_add_offsets_to_transaction``)."""
        if not transactional_id:
            return Answer(ErrorCode.invalid_request)
        state = self.state_manager.get_transaction_state(transactional_id)
        if state is None:
            return Answer(ErrorCode.invalid_producer_id_mapping)
        if isinstance(state, ErrorCode):
            return Answer(state)
        md = state.transaction_metadata
        added = frozenset(partitions)
        if md.pending_transition_in_progress:
            return Answer(ErrorCode.concurrent_transactions)
        if md.producer_id != producer_id:
            return Answer(ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch != producer_epoch:
            return Answer(ErrorCode.producer_fenced)
        if md.state in (_PC, _PA):
            return Answer(ErrorCode.concurrent_transactions)
        if md.state is _ONGOING and added <= md.topic_partitions:
            return Answer(ErrorCode.none)
        transit = md.prepare_add_partitions(added, now_ms, client_version)
        return self._write(transactional_id, state, transit, Purpose.ADD_PARTITIONS)

    def handle_add_offsets_to_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        offsets_partition: int, now_ms: int,
    ) -> Decision:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction
        (always a transactions v1 request, as in Kafka)."""
        return self.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, offsets_partition)],
            TransactionVersion.TV_0, now_ms)

    def handle_verify_partitions_in_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only`` (KIP-890 part 1): is each partition in the
        open transaction? TRANSACTION_ABORTABLE when not. Pending states are not checked: the
        partition's own append checks again."""
        wanted = list(partitions)

        def every(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(wanted, error)

        if not transactional_id:
            return every(ErrorCode.invalid_request)
        state = self.state_manager.get_transaction_state(transactional_id)
        if state is None:
            return every(ErrorCode.invalid_producer_id_mapping)
        if isinstance(state, ErrorCode):
            return every(state)
        md = state.transaction_metadata
        if md.producer_id != producer_id:
            return every(ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch != producer_epoch:
            return every(ErrorCode.producer_fenced)
        if md.state in (_PC, _PA):
            return every(ErrorCode.concurrent_transactions)
        return {tp: ErrorCode.none if tp in md.topic_partitions
                else ErrorCode.transaction_abortable for tp in wanted}

    # ------------------------------------------------------------ EndTxn
    def handle_end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        result: TransactionResult, client_version: TransactionVersion, now_ms: int,
    ) -> Decision:
        """EndTxn from a client (``client_version``: ``TransactionVersion.for_end_txn``)."""
        return self._end_transaction(transactional_id, producer_id, producer_epoch, result,
                                     is_from_client=True, client_version=client_version,
                                     now_ms=now_ms, purpose=Purpose.END_TXN)

    def _end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        result: TransactionResult, *, is_from_client: bool, client_version: TransactionVersion,
        now_ms: int, purpose: Purpose,
    ) -> Decision:
        if not transactional_id:
            return Answer(ErrorCode.invalid_request)
        state = self.state_manager.get_transaction_state(transactional_id)
        if state is None:
            return Answer(ErrorCode.invalid_producer_id_mapping)
        if isinstance(state, ErrorCode):
            return Answer(state)
        if client_version.supports_epoch_bump:
            return self._end_transaction_v2(transactional_id, state, producer_id, producer_epoch,
                                            result, is_from_client, client_version, now_ms,
                                            purpose)
        return self._end_transaction_v1(transactional_id, state, producer_id, producer_epoch,
                                        result, is_from_client, now_ms, purpose)

    def _end_transaction_v1(
        self, transactional_id: str, state: CoordinatorEpochAndTxnMetadata, producer_id: int,
        producer_epoch: int, result: TransactionResult, is_from_client: bool, now_ms: int,
        purpose: Purpose,
    ) -> Decision:
        md = state.transaction_metadata
        if md.producer_id != producer_id:
            return Answer(ErrorCode.invalid_producer_id_mapping)
        # A client never bumps the epoch itself: strict equality (the coordinator's own abort
        # after a fence names the bumped epoch).
        if ((is_from_client and producer_epoch != md.producer_epoch)
                or producer_epoch < md.producer_epoch):
            return Answer(ErrorCode.producer_fenced)
        if md.pending_state is not None and md.pending_state is not _FENCE:
            return Answer(ErrorCode.concurrent_transactions)
        if md.state is _ONGOING:
            is_epoch_fence = False
            if result is _ABORT and md.pending_state is _FENCE:
                # The fence is replaced by the abort, written at the bumped epoch.
                is_epoch_fence = True
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = md.prepare_abort_or_commit(result.prepare_state, TransactionVersion.TV_0,
                                                 NO_PRODUCER_ID, now_ms, no_partition_added=False)
            return self._write(transactional_id, state, transit, purpose, result=result,
                               producer_id=producer_id, producer_epoch=producer_epoch,
                               client_version=TransactionVersion.TV_0,
                               is_epoch_fence=is_epoch_fence)
        return Answer(_settled_answer_v1(md.state, result))

    def _end_transaction_v2(
        self, transactional_id: str, state: CoordinatorEpochAndTxnMetadata, producer_id: int,
        producer_epoch: int, result: TransactionResult, is_from_client: bool,
        client_version: TransactionVersion, now_ms: int, purpose: Purpose,
    ) -> Decision:
        md = state.transaction_metadata
        is_epoch_fence = md.pending_state is _FENCE
        # A retry of an EndTxn whose bump overflowed into a new producer id, or whose bump is
        # stored: the client still names the epoch before it.
        retry_on_overflow = (not is_epoch_fence and md.prev_producer_id == producer_id
                             and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and md.producer_epoch == 0)
        retry_on_epoch_bump = not is_epoch_fence and md.producer_epoch == producer_epoch + 1
        is_retry = retry_on_epoch_bump or retry_on_overflow
        if is_epoch_fence:
            valid_epoch = ((not is_from_client or producer_epoch == md.producer_epoch)
                           and producer_epoch >= md.producer_epoch)
        elif md.state in (_PC, _PA):
            valid_epoch = retry_on_epoch_bump
        elif md.state in (_CC, _CA):
            valid_epoch = is_retry or producer_epoch == md.producer_epoch
        else:
            valid_epoch = producer_epoch == md.producer_epoch

        if md.pending_state is not None and not is_epoch_fence:
            return Answer(ErrorCode.concurrent_transactions)
        if md.producer_id != producer_id and not retry_on_overflow:
            return Answer(ErrorCode.invalid_producer_id_mapping)
        if not valid_epoch:
            return Answer(ErrorCode.producer_fenced)

        def prepare(next_state: TransactionState, no_partition_added: bool) -> Decision:
            next_producer_id = NO_PRODUCER_ID
            if not is_epoch_fence and md.is_producer_epoch_exhausted:
                allocated = self._new_producer_id()
                if isinstance(allocated, ErrorCode):
                    return Answer(allocated)
                next_producer_id = allocated
            if is_epoch_fence:
                md.pending_state = None  # replaced by the abort, which bumps the epoch itself
            transit = md.prepare_abort_or_commit(next_state, client_version, next_producer_id,
                                                 now_ms, no_partition_added)
            return self._write(transactional_id, state, transit, purpose, result=result,
                               producer_id=producer_id, producer_epoch=producer_epoch,
                               client_version=client_version, is_epoch_fence=is_epoch_fence)

        current = Answer(ErrorCode.none, md.producer_id, md.producer_epoch)
        invalid = Answer(ErrorCode.invalid_txn_state)
        if md.state is _ONGOING:
            return prepare(result.prepare_state, no_partition_added=False)
        if md.state is _CC:
            if result is _COMMIT:
                return current if is_retry else invalid
            return invalid if is_retry else prepare(_PA, no_partition_added=True)
        if md.state is _CA:
            if result is _ABORT:
                return current if is_retry else prepare(_PA, no_partition_added=True)
            return invalid
        if md.state is _EMPTY:
            return prepare(_PA, no_partition_added=True) if result is _ABORT else invalid
        if md.state in (_PC, _PA):
            return (Answer(ErrorCode.concurrent_transactions)
                    if md.state is result.prepare_state else invalid)
        raise RuntimeError(f"{transactional_id} found in {md.state}: never a settled state")

    # ------------------------------------------------------------ timeouts
    def abort_timed_out_transactions(self, now_ms: int) -> list[WriteTxnLog]:
        """Fence and abort every Ongoing transaction past its ``transaction.timeout.ms``
        (``transaction.abort.timed.out.transaction.cleanup.interval.ms``)."""
        writes: list[WriteTxnLog] = []
        for timed_out in self.state_manager.timed_out_transactions(now_ms):
            state = self.state_manager.get_transaction_state(timed_out.transactional_id)
            if not isinstance(state, CoordinatorEpochAndTxnMetadata):
                continue
            md = state.transaction_metadata
            if md.producer_id != timed_out.producer_id or md.pending_transition_in_progress:
                continue
            fence = md.prepare_fence_producer_epoch()
            decision = self._end_transaction(
                timed_out.transactional_id, fence.producer_id, fence.producer_epoch, _ABORT,
                is_from_client=False,
                client_version=self.state_manager.transaction_version_level, now_ms=now_ms,
                purpose=Purpose.TIMEOUT_ABORT)
            if isinstance(decision, WriteTxnLog):
                writes.append(decision)
            elif md.pending_state is _FENCE:
                md.abort_pending_transition()
        return writes

    # ------------------------------------------------------------ after a write
    def complete_write(self, write: WriteTxnLog, append_error: int, now_ms: int) -> WriteOutcome:
        """The append of ``write`` finished with ``append_error`` (NONE = acknowledged)."""
        retry_on_error = write.purpose is Purpose.COMPLETE
        error = self.state_manager.complete_append(
            write.transactional_id, write.coordinator_epoch, write.transit, append_error,
            retry_on_error=retry_on_error)
        if write.purpose is Purpose.COMPLETE:
            return WriteOutcome(retry=error == ErrorCode.coordinator_not_available,
                                error=error)
        if write.purpose is Purpose.INIT_PRODUCER_ID:
            if error != ErrorCode.none:
                return WriteOutcome(Answer(error))
            return WriteOutcome(Answer(ErrorCode.none, write.transit.producer_id,
                                       write.transit.producer_epoch))
        if write.purpose is Purpose.ADD_PARTITIONS:
            return WriteOutcome(Answer(error))
        if error != ErrorCode.none:
            if write.is_epoch_fence and not write.client_transaction_version.supports_epoch_bump:
                self._mark_failed_epoch_fence(write)
            return self._end_outcome(write, Answer(error), None)
        answer, markers = self._prepare_markers(write, now_ms)
        return self._end_outcome(write, answer, markers)

    def _prepare_markers(self, write: WriteTxnLog,
                         now_ms: int) -> tuple[Answer, PendingCompleteTxn | None]:
        """The prepare is in the log: check nothing moved, prepare the completion, and start
        the markers (Kafka's ``sendTxnMarkersCallback``)."""
        if write.result is None:
            raise ValueError(f"{write.purpose} write of {write.transactional_id} has no result")
        state = self.state_manager.get_transaction_state(write.transactional_id)
        if isinstance(state, ErrorCode):
            return Answer(state), None
        if state is None or state.coordinator_epoch != write.coordinator_epoch:
            return Answer(ErrorCode.not_coordinator), None
        md = state.transaction_metadata
        v2 = write.client_transaction_version.supports_epoch_bump
        if md.producer_id != write.producer_id:
            return Answer(ErrorCode.invalid_producer_id_mapping), None
        if md.producer_epoch != write.producer_epoch and not (
                v2 and md.producer_epoch == write.producer_epoch + 1):
            return Answer(ErrorCode.producer_fenced), None
        if md.pending_transition_in_progress:
            return Answer(ErrorCode.concurrent_transactions), None
        if md.state is not write.result.prepare_state:
            return Answer(ErrorCode.invalid_txn_state), None
        complete = md.prepare_complete(now_ms)
        markers = PendingCompleteTxn(
            write.transactional_id, write.txn_partition, write.coordinator_epoch, write.result,
            md.producer_id, md.producer_epoch, frozenset(md.topic_partitions), complete,
            md.client_transaction_version)
        if v2:
            return Answer(ErrorCode.none, complete.producer_id, complete.producer_epoch), markers
        return Answer(ErrorCode.none), markers

    @staticmethod
    def _end_outcome(write: WriteTxnLog, answer: Answer,
                     markers: PendingCompleteTxn | None) -> WriteOutcome:
        if write.purpose is Purpose.TIMEOUT_ABORT:
            return WriteOutcome(None, markers)
        if write.purpose is Purpose.FENCE and answer.error == ErrorCode.none:
            return WriteOutcome(Answer(ErrorCode.concurrent_transactions), markers)
        if write.purpose is Purpose.FENCE:
            return WriteOutcome(Answer(answer.error), markers)
        return WriteOutcome(answer, markers)

    def _mark_failed_epoch_fence(self, write: WriteTxnLog) -> None:
        state = self.state_manager.get_transaction_state(write.transactional_id)
        if (isinstance(state, CoordinatorEpochAndTxnMetadata)
                and state.coordinator_epoch == write.coordinator_epoch):
            state.transaction_metadata.has_failed_epoch_fence = True

    def write_txn_completion(self, pending: PendingCompleteTxn) -> WriteTxnLog | None:
        """Every marker of ``pending`` is written: the CompleteCommit / CompleteAbort to
        append, or None when this coordinator no longer owns the id at that epoch (the new
        owner finishes it from the log)."""
        state = self.state_manager.get_transaction_state(pending.transactional_id)
        if (not isinstance(state, CoordinatorEpochAndTxnMetadata)
                or state.coordinator_epoch != pending.coordinator_epoch):
            return None
        return self._write(pending.transactional_id, state, pending.complete, Purpose.COMPLETE,
                           result=pending.result, producer_id=pending.producer_id,
                           producer_epoch=pending.producer_epoch,
                           client_version=pending.transaction_version)

    # ------------------------------------------------------------ helpers
    def _write(self, transactional_id: str, state: CoordinatorEpochAndTxnMetadata,
               transit: TxnTransitMetadata, purpose: Purpose, *,
               result: TransactionResult | None = None, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH,
               client_version: TransactionVersion = TransactionVersion.TV_0,
               is_epoch_fence: bool = False) -> WriteTxnLog:
        key, value = self.state_manager.record(transactional_id, transit)
        return WriteTxnLog(
            transactional_id, self.state_manager.partition_for(transactional_id),
            state.coordinator_epoch, transit, purpose, key, value, result, producer_id,
            producer_epoch, client_version, is_epoch_fence)

    def _new_producer_id(self) -> int | ErrorCode:
        try:
            return self._allocate()
        except ProducerIdUnavailableError as exc:
            return exc.error_code


def _is_valid_producer_id(md: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """KIP-360: a producer naming its id and epoch is not fenced if the id was just created,
    is the current one (its epoch is checked next), or is the previous one at an exhausted
    epoch (a retry across the rotation)."""
    return (md.producer_epoch == NO_PRODUCER_EPOCH
            or expected.producer_id == md.producer_id
            or (expected.producer_id == md.prev_producer_id
                and is_epoch_exhausted(expected.epoch)))


def _settled_answer_v1(state: TransactionState, result: TransactionResult) -> ErrorCode:
    """Transactions v1 EndTxn on a transaction that is not Ongoing."""
    if state.is_complete:
        return ErrorCode.none if state is result.complete_state else ErrorCode.invalid_txn_state
    if state.is_prepare:
        return (ErrorCode.concurrent_transactions if state is result.prepare_state
                else ErrorCode.invalid_txn_state)
    if state is _EMPTY:
        return ErrorCode.invalid_txn_state
    raise RuntimeError(f"a transaction is never settled in {state}")
