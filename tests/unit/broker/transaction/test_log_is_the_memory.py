"""Property: whatever clients do, the coordinator's memory is what its log says.

Random sequences of requests from one client (InitProducerId, AddPartitions, EndTxn v1 and v2,
stale epochs), coordinator work (timeouts, marker completion) and failed appends run against the
in-memory ``__transaction_state``. After every step no transition is refused as illegal, and
for every settled transactional id, replaying the log gives the cached metadata (all but the
last epoch, which Kafka's record does not hold) -- so a new coordinator would continue exactly
where this one stands.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata.broker.transaction.transaction_decision import Answer, ProducerIdAndEpoch, WriteTxnLog
from strata.broker.transaction.transaction_loader import replay
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_metadata import TransactionMetadata
from strata.broker.transaction.transaction_state import TransactionResult
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

from .txn_harness import TID, Harness

_ops = st.lists(st.tuples(
    st.sampled_from(["init", "recover", "add", "commit", "abort", "stale", "timeout",
                     "markers", "fail_next", "exhaust"]),
    st.sampled_from([TransactionVersion.TV_0, TransactionVersion.TV_2]),
    st.integers(min_value=0, max_value=3)), max_size=40)


def _settled_view(md: TransactionMetadata) -> tuple[object, ...]:
    return (md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch,
            md.txn_timeout_ms, md.state, frozenset(md.topic_partitions), md.txn_start_timestamp,
            md.txn_last_update_timestamp, md.client_transaction_version)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_replaying_the_log_gives_the_coordinators_memory(
        ops: list[tuple[str, TransactionVersion, int]]) -> None:
    h = Harness()
    client: tuple[int, int] | None = None
    markers: list[PendingCompleteTxn] = []
    fail_next = False

    def run(decision: Answer | WriteTxnLog) -> Answer | None:
        nonlocal fail_next
        error = ErrorCode.not_enough_replicas if fail_next else ErrorCode.none
        fail_next = False
        outcome = h.run(decision, error)
        if outcome.markers is not None:
            markers.append(outcome.markers)
        return outcome.answer

    for op, version, n in ops:
        h.now += 1_000 * (n + 1)
        coordinator = h.coordinator
        if op in ("init", "recover"):
            expected = (ProducerIdAndEpoch(*client) if op == "recover" and client else None)
            answer = run(coordinator.handle_init_producer_id(TID, 30_000, expected, h.now))
            if answer is not None and answer.error == ErrorCode.none:
                client = (answer.producer_id, answer.producer_epoch)
        elif op == "add" and client:
            run(coordinator.handle_add_partitions_to_transaction(
                TID, *client, [("t", n)], version, h.now))
        elif op in ("commit", "abort", "stale") and client:
            result = TransactionResult.COMMIT if op == "commit" else TransactionResult.ABORT
            pid, epoch = client
            answer = run(coordinator.handle_end_transaction(
                TID, pid, epoch - 1 if op == "stale" else epoch, result, version, h.now))
            if (answer is not None and answer.error == ErrorCode.none
                    and version.supports_epoch_bump and op != "stale"):
                client = (answer.producer_id, answer.producer_epoch)
        elif op == "timeout":
            for write in coordinator.abort_timed_out_transactions(h.now + 60_000):
                run(write)
        elif op == "markers" and markers:
            pending = markers.pop(0)
            completion = coordinator.write_txn_completion(pending)
            if completion is not None:
                outcome = h.run(completion)
                if outcome.retry:
                    markers.append(pending)
        elif op == "fail_next":
            fail_next = True
        elif op == "exhaust":
            state = h.manager.get_transaction_state(TID)
            if state is not None and not isinstance(state, ErrorCode):
                md = state.transaction_metadata
                if md.pending_state is None and md.producer_epoch >= 0 and md.state.is_complete:
                    md.producer_epoch = max(md.producer_epoch, 32765)
                    h.log.append((h.manager.partition_for(TID),
                                  *h.manager.record(TID, md.snapshot())))

        state = h.manager.get_transaction_state(TID)
        if state is None or isinstance(state, ErrorCode):
            continue
        md = state.transaction_metadata
        assert 0 <= md.producer_epoch <= 32767 or md.producer_epoch == -1
        if md.pending_state is None and h.log:
            partition = h.manager.partition_for(TID)
            loaded = replay([(k, v) for p, k, v in h.log if p == partition])
            if TID in loaded:
                assert _settled_view(loaded[TID]) == _settled_view(md)
