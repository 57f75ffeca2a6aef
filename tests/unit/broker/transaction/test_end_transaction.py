"""EndTxn in transactions v1 and v2, and the coordinator's abort of timed-out transactions.

Driven through the in-memory ``__transaction_state`` of ``txn_harness``; the expected errors and
epochs are Kafka's (``TransactionCoordinator.endTransaction``, KIP-890's table of v2 retries).
"""

from __future__ import annotations

import pytest

from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_decision import Answer, Purpose, WriteTxnLog
from strata.broker.transaction.transaction_log import read_value
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

from .txn_harness import PARTITIONS, T0, TID, Harness

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
NONE = ErrorCode.none


def ongoing(h: Harness, *partitions: tuple[str, int],
            version: TransactionVersion = TV0) -> tuple[int, int]:
    answer = h.init()
    assert h.add(answer.producer_id, answer.producer_epoch, *partitions, version=version) == NONE
    return answer.producer_id, answer.producer_epoch


# ------------------------------------------------------------------ EndTxn, transactions v1


def test_v1_commit_writes_markers_then_completes() -> None:
    h = Harness()
    pid, epoch = ongoing(h, ("orders", 0), ("payments", 1))
    outcome = h.end(pid, epoch, COMMIT)
    assert outcome.answer == Answer(NONE)  # v1: no producer id and epoch in the answer
    markers = outcome.markers
    assert markers is not None
    assert (markers.result, markers.producer_id, markers.producer_epoch) == (COMMIT, pid, epoch)
    assert markers.partitions == {("orders", 0), ("payments", 1)}
    md = h.md()
    assert md.state is TransactionState.PREPARE_COMMIT
    assert md.pending_state is TransactionState.COMPLETE_COMMIT
    assert h.end(pid, epoch, COMMIT).answer == Answer(ErrorCode.concurrent_transactions)
    h.finish_markers(markers)
    md = h.md()
    assert (md.state, md.topic_partitions, md.producer_epoch) == (
        TransactionState.COMPLETE_COMMIT, set(), epoch)
    states = [read_value(value) for _, _, value in h.log]
    assert [s.transaction_state for s in states if s is not None] == [
        TransactionState.EMPTY, TransactionState.ONGOING, TransactionState.PREPARE_COMMIT,
        TransactionState.COMPLETE_COMMIT]


@pytest.mark.parametrize(("state_after", "asked", "error"), [
    ("commit", COMMIT, NONE),                           # a retry of the commit
    ("commit", ABORT, ErrorCode.invalid_txn_state),
    ("abort", ABORT, NONE),
    ("abort", COMMIT, ErrorCode.invalid_txn_state),
    ("empty", COMMIT, ErrorCode.invalid_txn_state),
    ("empty", ABORT, ErrorCode.invalid_txn_state),
])
def test_v1_end_txn_on_a_settled_transaction(state_after: str, asked: TransactionResult,
                                             error: ErrorCode) -> None:
    h = Harness()
    if state_after == "empty":
        pid, epoch = h.init().producer_id, 0
    else:
        pid, epoch = ongoing(h)
        result = COMMIT if state_after == "commit" else ABORT
        h.finish_markers(h.end(pid, epoch, result).markers)
    records = len(h.log)
    assert h.end(pid, epoch, asked).answer == Answer(error)
    assert len(h.log) == records


def test_v1_end_txn_while_prepared() -> None:
    h = Harness()
    pid, epoch = ongoing(h)
    h.end(pid, epoch, ABORT)
    h.md().pending_state = None  # as after a load: prepared, markers not yet re-sent
    assert h.end(pid, epoch, ABORT).answer == Answer(ErrorCode.concurrent_transactions)
    assert h.end(pid, epoch, COMMIT).answer == Answer(ErrorCode.invalid_txn_state)


def test_end_txn_errors() -> None:
    h = Harness()
    assert h.end(1000, 0, COMMIT).answer == Answer(ErrorCode.invalid_producer_id_mapping)
    pid, epoch = ongoing(h)
    assert h.end(pid + 5, epoch, COMMIT).answer == Answer(ErrorCode.invalid_producer_id_mapping)
    assert h.end(pid, epoch + 1, COMMIT).answer == Answer(ErrorCode.producer_fenced)
    assert h.end(pid, epoch + 1, COMMIT, TV2).answer == Answer(ErrorCode.producer_fenced)


# ------------------------------------------------------------------ EndTxn, transactions v2


def test_v2_every_end_txn_bumps_the_epoch() -> None:
    h = Harness()
    pid, epoch = ongoing(h, version=TV2)
    outcome = h.end(pid, epoch, COMMIT, TV2)
    assert outcome.answer == Answer(NONE, pid, epoch + 1)
    assert outcome.markers is not None and outcome.markers.producer_epoch == epoch + 1
    assert outcome.markers.transaction_version is TV2
    h.finish_markers(outcome.markers)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (
        TransactionState.COMPLETE_COMMIT, epoch + 1, epoch)
    assert md.client_transaction_version is TV2
    # The next transaction runs at the bumped epoch.
    assert h.add(pid, epoch + 1, version=TV2) == NONE
    assert h.commit(pid, epoch + 1, TV2) == Answer(NONE, pid, epoch + 2)
    # A zombie at the first epoch is fenced.
    assert h.add(pid, epoch, version=TV2) == ErrorCode.producer_fenced


def test_v2_a_retried_end_txn_gets_the_same_answer() -> None:
    h = Harness()
    pid, epoch = ongoing(h, version=TV2)
    outcome = h.end(pid, epoch, COMMIT, TV2)
    # Retried while the markers are written: still in progress.
    assert h.end(pid, epoch, COMMIT, TV2).answer == Answer(ErrorCode.concurrent_transactions)
    h.finish_markers(outcome.markers)
    records = len(h.log)
    assert h.end(pid, epoch, COMMIT, TV2).answer == Answer(NONE, pid, epoch + 1)
    assert h.end(pid, epoch, ABORT, TV2).answer == Answer(ErrorCode.invalid_txn_state)
    assert len(h.log) == records
    # A commit at the current epoch with nothing open is not a retry.
    assert h.end(pid, epoch + 1, COMMIT, TV2).answer == Answer(ErrorCode.invalid_txn_state)
    # An epoch older than the retry's is a zombie.
    h.md().producer_epoch += 3
    assert h.end(pid, epoch, COMMIT, TV2).answer == Answer(ErrorCode.producer_fenced)


@pytest.mark.parametrize("settled", ["empty", "commit", "abort"])
def test_v2_abort_with_no_transaction_open_bumps_the_epoch(settled: str) -> None:
    h = Harness()
    if settled == "empty":
        pid, epoch = h.init().producer_id, 0
    else:
        pid, epoch = ongoing(h, version=TV2)
        markers = h.end(pid, epoch, COMMIT if settled == "commit" else ABORT, TV2).markers
        h.finish_markers(markers)
        epoch += 1
    h.now = T0 + 50
    outcome = h.end(pid, epoch, ABORT, TV2)
    assert outcome.answer == Answer(NONE, pid, epoch + 1)
    # No partitions: nothing to write markers to, the completion follows at once.
    assert outcome.markers is not None and outcome.markers.partitions == frozenset()
    h.finish_markers(outcome.markers)
    md = h.md()
    assert (md.state, md.producer_epoch, md.txn_start_timestamp) == (
        TransactionState.COMPLETE_ABORT, epoch + 1, T0 + 50)


def test_v2_commit_with_no_transaction_open_is_an_invalid_state() -> None:
    h = Harness()
    pid = h.init().producer_id
    assert h.end(pid, 0, COMMIT, TV2).answer == Answer(ErrorCode.invalid_txn_state)


def test_v2_epoch_overflow_rotates_the_producer_id_at_completion() -> None:
    h = Harness()
    pid = h.init().producer_id
    h.md().producer_epoch = 32766
    assert h.add(pid, 32766, version=TV2) == NONE
    decision = h.coordinator.handle_end_transaction(TID, pid, 32766, COMMIT, TV2, h.now)
    assert isinstance(decision, WriteTxnLog)
    assert (decision.transit.producer_epoch, decision.transit.next_producer_id) == (32767, 1001)
    value = read_value(decision.value)
    assert value is not None and value.next_producer_id == 1001
    outcome = h.run(decision)
    assert outcome.answer == Answer(NONE, 1001, 0)
    assert outcome.markers is not None
    assert (outcome.markers.producer_id, outcome.markers.producer_epoch) == (pid, 32767)
    # The retry while the completion is pending waits ...
    assert h.end(pid, 32766, COMMIT, TV2).answer == Answer(ErrorCode.concurrent_transactions)
    h.finish_markers(outcome.markers)
    md = h.md()
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id, md.last_producer_epoch) == (
        1001, 0, pid, 32766)
    # ... and afterwards is recognised across the rotation.
    assert h.end(pid, 32766, COMMIT, TV2).answer == Answer(NONE, 1001, 0)
    assert h.add(1001, 0, version=TV2) == NONE
    assert h.add(pid, 32767, version=TV2) == ErrorCode.invalid_producer_id_mapping


def test_v2_epoch_overflow_without_a_producer_id_is_retriable() -> None:
    h = Harness()
    pid = h.init().producer_id
    h.md().producer_epoch = 32766
    h.add(pid, 32766, version=TV2)
    h.allocator.unavailable = True
    outcome = h.end(pid, 32766, COMMIT, TV2)
    assert outcome.answer == Answer(ErrorCode.coordinator_load_in_progress)
    assert h.md().pending_state is None and h.md().state is TransactionState.ONGOING


# ------------------------------------------------------------------ timeouts


@pytest.mark.parametrize("server_version", [TV0, TV2])
def test_a_transaction_past_its_timeout_is_fenced_and_aborted(
        server_version: TransactionVersion) -> None:
    h = Harness(config=TransactionConfig(num_partitions=PARTITIONS,
                                         transaction_version=server_version))
    pid, epoch = ongoing(h)
    assert h.coordinator.abort_timed_out_transactions(T0 + 60_000) == []
    writes = h.coordinator.abort_timed_out_transactions(T0 + 60_001)
    assert [w.purpose for w in writes] == [Purpose.TIMEOUT_ABORT]
    outcome = h.run(writes[0])
    assert outcome.answer is None  # nobody waits
    assert outcome.markers is not None and outcome.markers.result is ABORT
    assert outcome.markers.producer_epoch == epoch + 1
    # Already being aborted: not picked again.
    assert h.coordinator.abort_timed_out_transactions(T0 + 120_000) == []
    assert h.add(pid, epoch) == ErrorCode.concurrent_transactions
    h.finish_markers(outcome.markers)
    assert h.md().state is TransactionState.COMPLETE_ABORT
    assert h.add(pid, epoch) == ErrorCode.producer_fenced
    assert h.end(pid, epoch, COMMIT).answer == Answer(ErrorCode.producer_fenced)


def test_only_ongoing_transactions_time_out() -> None:
    h = Harness()
    h.init()
    h.init("other")
    pid, epoch = h.md("other").producer_id, 0
    h.add(pid, epoch, transactional_id="other")
    late = T0 + 10 * 60_000
    assert [w.transactional_id for w in h.coordinator.abort_timed_out_transactions(late)] == [
        "other"]
