"""A coordinator over an in-memory ``__transaction_state``: what the broker's shell will do.

``Harness.run(decision)`` appends a ``WriteTxnLog`` to the list ``log`` (or fails it with the
given error) and completes it, as the I/O shell must; ``finish_markers`` acknowledges every
marker and writes the completion. Used by the coordinator, loader and failover tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_coordinator import TransactionCoordinator
from strata.broker.transaction.transaction_decision import (
    Answer,
    Decision,
    ProducerIdAndEpoch,
    ProducerIdUnavailableError,
    WriteOutcome,
    WriteTxnLog,
)
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_metadata import TransactionMetadata
from strata.broker.transaction.transaction_state import TransactionResult
from strata.broker.transaction.transaction_state_manager import TransactionStateManager
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

TID = "txn-1"
T0 = 1_700_000_000_000
PARTITIONS = 4


class Allocator:
    """Producer ids 1000, 1001, ...; ``unavailable`` makes the next call raise."""

    def __init__(self, start: int = 1000) -> None:
        self.next_id = start
        self.unavailable = False

    def __call__(self) -> int:
        if self.unavailable:
            raise ProducerIdUnavailableError()
        self.next_id += 1
        return self.next_id - 1


@dataclass
class Harness:
    config: TransactionConfig = field(default_factory=lambda: TransactionConfig(
        num_partitions=PARTITIONS))
    coordinator_epoch: int = 7
    allocator: Allocator = field(default_factory=Allocator)
    log: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)
    now: int = T0

    def __post_init__(self) -> None:
        self.manager = TransactionStateManager(self.config)
        self.coordinator = TransactionCoordinator(self.manager, self.allocator)
        for partition in range(self.config.num_partitions):
            self.manager.begin_loading(partition, self.coordinator_epoch)
            self.manager.complete_loading(partition, self.coordinator_epoch, {}, self.now)

    # -------------------------------------------------------------- plumbing
    def run(self, decision: Decision, append_error: int = ErrorCode.none) -> WriteOutcome:
        """Append (or fail) a write and complete it; an Answer is returned as an outcome."""
        if isinstance(decision, Answer):
            return WriteOutcome(decision)
        assert isinstance(decision, WriteTxnLog)
        if append_error == ErrorCode.none:
            self.log.append((decision.txn_partition, decision.key, decision.value))
        return self.coordinator.complete_write(decision, append_error, self.now)

    def md(self, transactional_id: str = TID) -> TransactionMetadata:
        state = self.manager.get_transaction_state(transactional_id)
        assert state is not None and not isinstance(state, ErrorCode)
        return state.transaction_metadata

    def finish_markers(self, pending: PendingCompleteTxn | None,
                       append_error: int = ErrorCode.none) -> WriteOutcome | None:
        """Every marker acknowledged: write the completion."""
        assert pending is not None
        write = self.coordinator.write_txn_completion(pending)
        if write is None:
            return None
        return self.run(write, append_error)

    # -------------------------------------------------------------- requests
    def init(self, transactional_id: str = TID, timeout_ms: int = 60_000,
             expected: ProducerIdAndEpoch | None = None) -> Answer:
        outcome = self.run(self.coordinator.handle_init_producer_id(
            transactional_id, timeout_ms, expected, self.now))
        assert outcome.answer is not None
        return outcome.answer

    def add(self, pid: int, epoch: int, *partitions: tuple[str, int],
            transactional_id: str = TID,
            version: TransactionVersion = TransactionVersion.TV_0) -> ErrorCode:
        outcome = self.run(self.coordinator.handle_add_partitions_to_transaction(
            transactional_id, pid, epoch, partitions or [("orders", 0)], version, self.now))
        assert outcome.answer is not None
        return outcome.answer.error

    def end(self, pid: int, epoch: int, result: TransactionResult,
            version: TransactionVersion = TransactionVersion.TV_0,
            transactional_id: str = TID) -> WriteOutcome:
        return self.run(self.coordinator.handle_end_transaction(
            transactional_id, pid, epoch, result, version, self.now))

    def commit(self, pid: int, epoch: int,
               version: TransactionVersion = TransactionVersion.TV_0) -> Answer:
        """EndTxn commit, markers acknowledged, completion written; the EndTxn answer."""
        outcome = self.end(pid, epoch, TransactionResult.COMMIT, version)
        assert outcome.answer is not None
        if outcome.markers is not None:
            self.finish_markers(outcome.markers)
        return outcome.answer
