"""The coordinator's decisions, driven through an in-memory ``__transaction_state``.

Every flow goes request -> decision -> append -> ``complete_write`` as the broker's shell will;
the expected errors and epochs are Kafka's (``TransactionCoordinator``, KIP-98/360/890).
"""

from __future__ import annotations

import pytest

from strata.broker.coordinator_partition import partition_for
from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_decision import (
    Answer,
    ProducerIdAndEpoch,
    Purpose,
    WriteTxnLog,
    fenced_error_for_version,
)
from strata.broker.transaction.transaction_log import read_value
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.api_keys import ApiKey
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


# ------------------------------------------------------------------ InitProducerId


def test_a_new_transactional_id_gets_a_new_producer_id_at_epoch_0() -> None:
    h = Harness()
    assert h.init() == Answer(NONE, 1000, 0)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TransactionState.EMPTY, 0, -1)
    assert len(h.log) == 1 and h.log[0][0] == partition_for(TID, PARTITIONS)


def test_a_second_producer_fences_the_first() -> None:
    h = Harness()
    first = h.init()
    second = h.init()
    assert second == Answer(NONE, 1000, 1)
    # The zombie's requests at epoch 0 are fenced.
    assert h.add(1000, first.producer_epoch) == ErrorCode.producer_fenced
    outcome = h.end(1000, first.producer_epoch, COMMIT)
    assert outcome.answer == Answer(ErrorCode.producer_fenced)
    assert h.add(1000, 1) == NONE


def test_without_transactional_id_an_idempotent_producer_gets_an_id_and_epoch_0() -> None:
    h = Harness()
    assert h.coordinator.handle_init_producer_id(None, 0, None, T0) == Answer(NONE, 1000, 0)
    assert h.log == []


@pytest.mark.parametrize(("timeout_ms", "error"), [
    (0, ErrorCode.invalid_transaction_timeout), (-1, ErrorCode.invalid_transaction_timeout),
    (900_001, ErrorCode.invalid_transaction_timeout), (900_000, NONE), (1, NONE)])
def test_transaction_timeout_is_checked_against_transaction_max_timeout_ms(
        timeout_ms: int, error: ErrorCode) -> None:
    assert Harness().init(timeout_ms=timeout_ms).error == error


def test_an_empty_transactional_id_is_an_invalid_request() -> None:
    h = Harness()
    assert h.init("").error == ErrorCode.invalid_request
    assert h.add(1, 0, transactional_id="") == ErrorCode.invalid_request
    assert h.end(1, 0, COMMIT, transactional_id="").answer == Answer(ErrorCode.invalid_request)


def test_two_phase_commit_is_refused_as_by_a_broker_without_it() -> None:
    h = Harness()
    init = h.coordinator.handle_init_producer_id
    assert init(TID, 60_000, None, T0, enable_two_pc=True) == Answer(
        ErrorCode.transactional_id_authorization_failed)
    assert init(TID, 60_000, None, T0, keep_prepared_txn=True) == Answer(
        ErrorCode.unsupported_version)
    assert h.log == []


def test_kip_360_a_producer_recovering_its_epoch() -> None:
    h = Harness()
    h.init()
    # The current epoch: bumped, the old one remembered as the last epoch.
    assert h.init(expected=ProducerIdAndEpoch(1000, 0)) == Answer(NONE, 1000, 1)
    assert h.md().last_producer_epoch == 0
    # The same request again (its answer was lost): the current epoch, not bumped twice.
    assert h.init(expected=ProducerIdAndEpoch(1000, 0)) == Answer(NONE, 1000, 1)
    # Any other epoch or producer id is a zombie.
    assert h.init(expected=ProducerIdAndEpoch(1000, 5)).error == ErrorCode.producer_fenced
    assert h.init(expected=ProducerIdAndEpoch(999, 1)).error == ErrorCode.producer_fenced


def test_kip_360_a_recovering_producer_of_an_unknown_id_gets_the_new_one() -> None:
    assert Harness().init(expected=ProducerIdAndEpoch(42, 3)) == Answer(NONE, 1000, 0)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    h = Harness()
    h.init()
    h.md().producer_epoch = 32766
    assert h.init() == Answer(NONE, 1001, 0)
    md = h.md()
    assert (md.prev_producer_id, md.last_producer_epoch) == (1000, -1)


def test_a_recovering_producer_at_an_exhausted_epoch_rotates_and_may_retry() -> None:
    h = Harness()
    h.init()
    h.md().producer_epoch = 32766
    expected = ProducerIdAndEpoch(1000, 32766)
    assert h.init(expected=expected) == Answer(NONE, 1001, 0)
    assert h.md().last_producer_epoch == 32766
    # The retry names the old id at its exhausted epoch: the rotation is answered again.
    assert h.init(expected=expected) == Answer(NONE, 1001, 0)


@pytest.mark.parametrize("server_version", [TV0, TV2])
def test_init_producer_id_fences_and_aborts_an_open_transaction(
        server_version: TransactionVersion) -> None:
    h = Harness(config=TransactionConfig(num_partitions=PARTITIONS,
                                         transaction_version=server_version))
    pid, epoch = ongoing(h, ("orders", 0), ("orders", 1))
    decision = h.coordinator.handle_init_producer_id(TID, 60_000, None, h.now)
    assert isinstance(decision, WriteTxnLog) and decision.purpose is Purpose.FENCE
    assert decision.transit.txn_state is TransactionState.PREPARE_ABORT
    outcome = h.run(decision)
    assert outcome.answer == Answer(ErrorCode.concurrent_transactions)
    markers = outcome.markers
    assert markers is not None and markers.result is ABORT
    assert (markers.producer_id, markers.producer_epoch) == (pid, epoch + 1)
    assert markers.partitions == {("orders", 0), ("orders", 1)}
    # While the markers are written, the retry is told to wait.
    assert h.init().error == ErrorCode.concurrent_transactions
    h.finish_markers(markers)
    assert h.md().state is TransactionState.COMPLETE_ABORT
    # The retry bumps the epoch a second time.
    assert h.init() == Answer(NONE, pid, epoch + 2)
    assert h.add(pid, epoch + 1) == ErrorCode.producer_fenced


def test_a_failed_fence_does_not_bump_the_epoch_twice() -> None:
    h = Harness(config=TransactionConfig(num_partitions=PARTITIONS, transaction_version=TV0))
    _pid, epoch = ongoing(h)
    decision = h.coordinator.handle_init_producer_id(TID, 60_000, None, h.now)
    outcome = h.run(decision, append_error=ErrorCode.not_enough_replicas)
    assert outcome.answer == Answer(ErrorCode.coordinator_not_available)
    md = h.md()
    assert md.has_failed_epoch_fence and md.pending_state is None
    assert md.producer_epoch == epoch + 1
    outcome = h.run(h.coordinator.handle_init_producer_id(TID, 60_000, None, h.now))
    assert outcome.markers is not None and outcome.markers.producer_epoch == epoch + 1


def test_init_producer_id_while_a_transaction_is_prepared_is_concurrent() -> None:
    h = Harness()
    pid, epoch = ongoing(h)
    outcome = h.end(pid, epoch, COMMIT)
    assert h.md().state is TransactionState.PREPARE_COMMIT
    assert h.init().error == ErrorCode.concurrent_transactions
    h.finish_markers(outcome.markers)
    assert h.init() == Answer(NONE, pid, epoch + 1)


# ------------------------------------------------------------------ AddPartitionsToTxn


def test_add_partitions_starts_a_transaction_and_is_idempotent() -> None:
    h = Harness()
    pid, epoch = h.init().producer_id, 0
    h.now = T0 + 5
    assert h.add(pid, epoch, ("orders", 0)) == NONE
    md = h.md()
    assert (md.state, md.txn_start_timestamp) == (TransactionState.ONGOING, T0 + 5)
    records = len(h.log)
    h.now = T0 + 9
    assert h.add(pid, epoch, ("orders", 0)) == NONE
    assert len(h.log) == records  # already in the transaction: answered without a write
    assert h.add(pid, epoch, ("payments", 3)) == NONE
    assert h.md().topic_partitions == {("orders", 0), ("payments", 3)}
    assert h.md().txn_start_timestamp == T0 + 5
    value = read_value(h.log[-1][2])
    assert value is not None and value.partitions == {("orders", 0), ("payments", 3)}


def test_add_partitions_errors() -> None:
    h = Harness()
    assert h.add(1000, 0) == ErrorCode.invalid_producer_id_mapping  # unknown id
    pid = h.init().producer_id
    assert h.add(pid + 1, 0) == ErrorCode.invalid_producer_id_mapping
    assert h.add(pid, 1) == ErrorCode.producer_fenced
    decision = h.coordinator.handle_add_partitions_to_transaction(
        TID, pid, 0, [("orders", 0)], TV0, h.now)
    assert isinstance(decision, WriteTxnLog)
    # A write in flight: every other request waits.
    assert h.add(pid, 0, ("orders", 1)) == ErrorCode.concurrent_transactions
    h.run(decision)
    outcome = h.end(pid, 0, COMMIT)
    assert h.add(pid, 0, ("orders", 2)) == ErrorCode.concurrent_transactions
    h.finish_markers(outcome.markers)
    # A new transaction after the last one completed.
    h.now = T0 + 100
    assert h.add(pid, 0, ("orders", 2)) == NONE
    assert h.md().txn_start_timestamp == T0 + 100


def test_add_offsets_adds_the_groups_consumer_offsets_partition() -> None:
    h = Harness()
    pid = h.init().producer_id
    outcome = h.run(h.coordinator.handle_add_offsets_to_transaction(TID, pid, 0, 12, h.now))
    assert outcome.answer == Answer(NONE)
    assert h.md().topic_partitions == {("__consumer_offsets", 12)}


def test_verify_only_checks_the_open_transaction() -> None:
    h = Harness()
    verify = h.coordinator.handle_verify_partitions_in_transaction
    tp0, tp1 = ("orders", 0), ("orders", 1)
    assert verify(TID, 1000, 0, [tp0]) == {tp0: ErrorCode.invalid_producer_id_mapping}
    assert verify("", 1000, 0, [tp0]) == {tp0: ErrorCode.invalid_request}
    pid = h.init().producer_id
    assert verify(TID, pid, 0, [tp0]) == {tp0: ErrorCode.transaction_abortable}
    h.add(pid, 0, tp0)
    assert verify(TID, pid, 0, [tp0, tp1]) == {tp0: NONE, tp1: ErrorCode.transaction_abortable}
    assert verify(TID, pid, 1, [tp0]) == {tp0: ErrorCode.producer_fenced}
    assert verify(TID, pid + 1, 0, [tp0]) == {tp0: ErrorCode.invalid_producer_id_mapping}
    h.end(pid, 0, COMMIT)
    assert verify(TID, pid, 0, [tp0]) == {tp0: ErrorCode.concurrent_transactions}


# ------------------------------------------------------------------ ownership and the log


def test_a_partition_not_led_here_or_loading() -> None:
    h = Harness()
    partition = partition_for(TID, PARTITIONS)
    h.manager.unload(partition)
    assert h.init().error == ErrorCode.not_coordinator
    assert h.add(1000, 0) == ErrorCode.not_coordinator
    h.manager.begin_loading(partition, 9)
    assert h.init().error == ErrorCode.coordinator_load_in_progress
    assert h.end(1000, 0, ABORT).answer == Answer(ErrorCode.coordinator_load_in_progress)


def test_no_producer_id_available_is_retriable() -> None:
    h = Harness()
    h.allocator.unavailable = True
    assert h.init().error == ErrorCode.coordinator_load_in_progress
    assert h.manager.get_transaction_state(TID) is None


@pytest.mark.parametrize(("append_error", "error"), [
    (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
    (ErrorCode.not_enough_replicas_after_append, ErrorCode.coordinator_not_available),
    (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
    (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_not_available),
    (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
    (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ErrorCode.message_too_large, ErrorCode.unknown_server_error),
    (ErrorCode.record_list_too_large, ErrorCode.unknown_server_error),
])
def test_a_failed_append_is_answered_with_a_coordinator_error(append_error: ErrorCode,
                                                              error: ErrorCode) -> None:
    h = Harness()
    h.init()
    decision = h.coordinator.handle_init_producer_id(TID, 60_000, None, h.now)
    assert h.run(decision, append_error).answer == Answer(error)
    md = h.md()
    assert (md.pending_state, md.producer_epoch) == (None, 0)  # nothing changed
    assert h.init() == Answer(NONE, 1000, 1)


def test_an_append_acknowledged_after_a_coordinator_change_is_not_applied() -> None:
    h = Harness()
    h.init()
    decision = h.coordinator.handle_init_producer_id(TID, 60_000, None, h.now)
    partition = partition_for(TID, PARTITIONS)
    h.manager.unload(partition)
    h.manager.begin_loading(partition, 8)
    h.manager.complete_loading(partition, 8, {}, h.now)
    assert h.run(decision).answer == Answer(ErrorCode.not_coordinator)


def test_a_completion_that_could_not_be_appended_is_retried() -> None:
    h = Harness()
    pid, epoch = ongoing(h)
    markers = h.end(pid, epoch, COMMIT).markers
    outcome = h.finish_markers(markers, append_error=ErrorCode.not_enough_replicas)
    assert outcome is not None and outcome.retry
    assert h.md().pending_state is TransactionState.COMPLETE_COMMIT  # kept for the retry
    outcome = h.finish_markers(markers)
    assert outcome is not None and not outcome.retry
    assert h.md().state is TransactionState.COMPLETE_COMMIT


def test_no_completion_is_written_by_a_coordinator_that_resigned() -> None:
    h = Harness()
    pid, epoch = ongoing(h)
    markers = h.end(pid, epoch, COMMIT).markers
    h.manager.unload(partition_for(TID, PARTITIONS))
    assert markers is not None and h.coordinator.write_txn_completion(markers) is None


def test_records_are_written_at_the_value_version_of_transaction_version() -> None:
    for level, version in [(TV0, 0), (TransactionVersion.TV_1, 1), (TV2, 1)]:
        h = Harness(config=TransactionConfig(num_partitions=PARTITIONS,
                                             transaction_version=level))
        h.init()
        value = h.log[0][2]
        assert value is not None and value[:2] == version.to_bytes(2, "big")


# ------------------------------------------------------------------ expiration


def test_idle_transactional_ids_expire_after_transactional_id_expiration_ms() -> None:
    h = Harness()
    h.init()
    h.init("busy")
    h.add(h.md("busy").producer_id, 0, transactional_id="busy")
    expiry = T0 + 604_800_000
    assert h.manager.expire_transactional_ids(expiry - 1) == []
    expired = h.manager.expire_transactional_ids(expiry)
    assert [e.transactional_id for e in expired] == [TID]  # an Ongoing id never expires
    assert h.md().pending_state is TransactionState.DEAD
    assert h.init().error == ErrorCode.concurrent_transactions
    assert h.manager.complete_expiration(expired[0], NONE)
    assert h.manager.get_transaction_state(TID) is None
    assert h.init() == Answer(NONE, 1002, 0)  # forgotten: a new producer id


def test_a_tombstone_that_failed_keeps_the_id() -> None:
    h = Harness()
    h.init()
    expired = h.manager.expire_transactional_ids(T0 + 604_800_000)
    assert not h.manager.complete_expiration(expired[0], ErrorCode.not_enough_replicas)
    assert h.md().pending_state is None
    assert h.init() == Answer(NONE, 1000, 1)


# ------------------------------------------------------------------ old clients


@pytest.mark.parametrize(("api_key", "old", "new"), [
    (ApiKey.INIT_PRODUCER_ID, 3, 4), (ApiKey.END_TXN, 1, 2),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 1, 2), (ApiKey.ADD_OFFSETS_TO_TXN, 1, 2)])
def test_producer_fenced_is_invalid_producer_epoch_for_older_clients(
        api_key: ApiKey, old: int, new: int) -> None:
    fenced = ErrorCode.producer_fenced
    assert fenced_error_for_version(api_key, old, fenced) == ErrorCode.invalid_producer_epoch
    assert fenced_error_for_version(api_key, new, fenced) == fenced
    assert fenced_error_for_version(api_key, old, NONE) == NONE
    assert fenced_error_for_version(ApiKey.PRODUCE, 0, fenced) == fenced


def test_transaction_version_of_a_request() -> None:
    assert TransactionVersion.for_end_txn(4) is TV0
    assert TransactionVersion.for_end_txn(5) is TV2
    assert TransactionVersion.for_add_partitions_to_txn(3) is TV0
    assert TransactionVersion.for_add_partitions_to_txn(4) is TV2
