"""Loading a ``__transaction_state`` partition: replay, tombstones, and a coordinator failover
that finishes what its predecessor prepared."""

from __future__ import annotations

from strata.broker.config import BrokerConfig
from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_decision import Answer
from strata.broker.transaction.transaction_loader import replay
from strata.broker.transaction.transaction_log import key_to_bytes
from strata.broker.transaction.transaction_markers import PendingCompleteTxn, TransactionMarkerBook
from strata.broker.transaction.transaction_metadata import TransactionMetadata
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_state_manager import TransactionStateManager
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

from .txn_harness import PARTITIONS, T0, TID, Harness

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
TV2 = TransactionVersion.TV_2
S = TransactionState


def records_of(h: Harness, partition: int) -> list[tuple[bytes, bytes | None]]:
    return [(key, value) for p, key, value in h.log if p == partition]


def take_over(h: Harness, coordinator_epoch: int = 8) -> tuple[Harness, list[PendingCompleteTxn]]:
    """A new coordinator (another broker) loads every partition of ``h``'s log."""
    successor = Harness(coordinator_epoch=coordinator_epoch, allocator=h.allocator,
                        log=list(h.log))
    for partition in range(PARTITIONS):
        successor.manager.unload(partition)
        successor.manager.begin_loading(partition, coordinator_epoch)
    assert successor.init().error == ErrorCode.coordinator_load_in_progress
    resend: list[PendingCompleteTxn] = []
    for partition in range(PARTITIONS):
        pending = successor.manager.complete_loading(
            partition, coordinator_epoch, replay(records_of(h, partition)), successor.now)
        assert pending is not None
        resend.extend(pending)
    return successor, resend


def test_replay_keeps_the_last_value_and_forgets_tombstones() -> None:
    h = Harness()
    h.init()
    h.init("other")
    h.init()
    records = [(key, value) for _, key, value in h.log]
    loaded = replay(records)
    assert loaded[TID].producer_epoch == 1 and loaded["other"].producer_epoch == 0
    loaded = replay([*records, (key_to_bytes("other"), None)])
    assert set(loaded) == {TID}


def test_replay_skips_other_coordinator_record_types() -> None:
    h = Harness()
    h.init()
    foreign = (bytes.fromhex("0005" "0001" "61"), b"\x00\x00whatever")
    loaded = replay([foreign, *[(k, v) for _, k, v in h.log]])
    assert set(loaded) == {TID}


def test_a_prepared_commit_is_completed_by_the_next_coordinator() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, ("orders", 0), ("orders", 1))
    outcome = h.end(1000, 0, COMMIT)
    assert outcome.markers is not None  # ... and the coordinator dies before the markers
    successor, resend = take_over(h)
    assert len(resend) == 1
    pending = resend[0]
    assert (pending.transactional_id, pending.result, pending.producer_id,
            pending.producer_epoch, pending.coordinator_epoch) == (TID, COMMIT, 1000, 0, 8)
    assert pending.partitions == {("orders", 0), ("orders", 1)}
    md = successor.md()
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert successor.init().error == ErrorCode.concurrent_transactions
    book = TransactionMarkerBook()
    book.add(pending)
    (request,), _ = book.build_requests(lambda tp: 1)
    results = book.on_response(request, {1000: dict.fromkeys(pending.partitions, 0)})
    assert results.completed == (pending,)
    successor.finish_markers(pending)
    assert successor.md().state is S.COMPLETE_COMMIT
    assert successor.init() == Answer(ErrorCode.none, 1000, 1)


def test_settled_and_ongoing_transactions_are_loaded_without_markers() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, ("orders", 0))
    h.init("done")
    h.add(1001, 0, ("orders", 3), transactional_id="done")
    h.finish_markers(h.end(1001, 0, ABORT, transactional_id="done").markers)
    successor, resend = take_over(h)
    assert resend == []
    ongoing, done = successor.md(), successor.md("done")
    assert (ongoing.state, ongoing.topic_partitions, ongoing.txn_start_timestamp) == (
        S.ONGOING, {("orders", 0)}, T0)
    assert (done.state, done.topic_partitions) == (S.COMPLETE_ABORT, set())
    # The open transaction still times out under its new coordinator.
    assert len(successor.coordinator.abort_timed_out_transactions(T0 + 60_001)) == 1


def test_a_v2_overflow_prepared_before_a_failover_still_rotates() -> None:
    h = Harness()
    h.init()
    h.md().producer_epoch = 32766
    h.add(1000, 32766, ("orders", 0), version=TV2)
    assert h.end(1000, 32766, COMMIT, TV2).answer == Answer(ErrorCode.none, 1001, 0)
    successor, (pending,) = take_over(h)
    assert (pending.producer_id, pending.producer_epoch) == (1000, 32767)
    assert (pending.complete.producer_id, pending.complete.producer_epoch) == (1001, 0)
    successor.finish_markers(pending)
    md = successor.md()
    assert (md.producer_id, md.producer_epoch, md.state) == (1001, 0, S.COMPLETE_COMMIT)


def test_a_cancelled_load_installs_nothing() -> None:
    manager = TransactionStateManager(TransactionConfig(num_partitions=PARTITIONS))
    manager.begin_loading(1, 5)
    manager.unload(1)  # resigned while loading
    assert manager.complete_loading(1, 5, {"x": TransactionMetadata("x", 1)}, T0) is None
    assert manager.owned_partitions == frozenset()
    manager.begin_loading(1, 6)
    manager.unload(1, coordinator_epoch=6)  # a resignation of the same epoch keeps the load
    assert manager.loading_partitions == {1: 6}
    manager.begin_loading(1, 7)  # elected again meanwhile: the older load is superseded
    assert manager.complete_loading(1, 6, {}, T0) is None
    assert manager.complete_loading(1, 7, {}, T0) == []


def test_broker_config_defaults_are_kafkas() -> None:
    config = TransactionConfig.from_broker_config(BrokerConfig({}))
    assert config == TransactionConfig()
    assert (config.num_partitions, config.replication_factor, config.min_insync_replicas,
            config.segment_bytes, config.transaction_max_timeout_ms,
            config.transactional_id_expiration_ms,
            config.abort_timed_out_transactions_interval_ms,
            config.remove_expired_transactional_ids_interval_ms,
            config.transaction_version) == (
        50, 3, 2, 104857600, 900000, 604800000, 10000, 3600000, TransactionVersion.TV_2)
    overridden = TransactionConfig.from_broker_config(BrokerConfig({
        "transaction.max.timeout.ms": "5000", "transaction.version": "0"}))
    assert overridden.transaction_max_timeout_ms == 5000
    assert overridden.transaction_version is TransactionVersion.TV_0
    assert not BrokerConfig({"transaction.state.log.num.partitions": "3"}).unknown_keys()
