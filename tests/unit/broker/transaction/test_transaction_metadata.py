"""``TransactionMetadata``: prepare returns a transit and sets the pending state; complete
applies it; Kafka's epoch rules."""

from __future__ import annotations

import pytest

from strata.broker.transaction.transaction_metadata import (
    IllegalTransactionTransition,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from strata.broker.transaction.transaction_state import TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

S = TransactionState
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
T = 1_000
TP = frozenset({("orders", 0)})


def fresh(**fields: object) -> TransactionMetadata:
    md = TransactionMetadata("t", 50, txn_timeout_ms=10_000, txn_last_update_timestamp=T)
    for name, value in fields.items():
        setattr(md, name, value)
    return md


def apply(md: TransactionMetadata, transit: TxnTransitMetadata | ErrorCode) -> None:
    assert isinstance(transit, TxnTransitMetadata)
    md.complete_transition_to(transit)


def test_prepare_sets_the_pending_state_and_changes_nothing_else() -> None:
    md = fresh()
    before = md.snapshot()
    transit = md.prepare_increment_producer_epoch(20_000, None, T + 1)
    assert md.pending_state is S.EMPTY and md.snapshot() == before
    assert transit != before
    with pytest.raises(IllegalTransactionTransition, match="pending"):
        md.prepare_add_partitions(TP, T + 2, TV0)
    md.abort_pending_transition()
    assert md.snapshot() == before
    assert md.pending_state is None


def test_a_whole_v1_transaction() -> None:
    md = fresh()
    apply(md, md.prepare_increment_producer_epoch(20_000, None, T + 1))
    assert (md.producer_epoch, md.txn_timeout_ms, md.state) == (0, 20_000, S.EMPTY)
    apply(md, md.prepare_add_partitions(TP, T + 2, TV0))
    assert (md.state, md.topic_partitions, md.txn_start_timestamp) == (S.ONGOING, set(TP), T + 2)
    apply(md, md.prepare_add_partitions(frozenset({("orders", 1)}), T + 3, TV0))
    assert md.topic_partitions == {("orders", 0), ("orders", 1)}
    assert md.txn_start_timestamp == T + 2
    apply(md, md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, -1, T + 4, False))
    assert (md.state, md.producer_epoch) == (S.PREPARE_COMMIT, 0)
    apply(md, md.prepare_complete(T + 5))
    assert (md.state, md.topic_partitions, md.producer_epoch, md.txn_last_update_timestamp) == (
        S.COMPLETE_COMMIT, set(), 0, T + 5)


def test_v2_bumps_at_prepare_and_rotates_at_completion_when_exhausted() -> None:
    md = fresh(producer_epoch=32766, state=S.ONGOING, topic_partitions=set(TP),
               txn_start_timestamp=T)
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, 77, T + 1, False)
    assert (transit.producer_epoch, transit.last_producer_epoch, transit.next_producer_id) == (
        32767, 32766, 77)
    apply(md, transit)
    complete = md.prepare_complete(T + 2)
    assert (complete.producer_id, complete.producer_epoch, complete.prev_producer_id,
            complete.next_producer_id, complete.last_producer_epoch) == (77, 0, 50, -1, 32766)
    apply(md, complete)
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id, md.state) == (
        77, 0, 50, S.COMPLETE_ABORT)


@pytest.mark.parametrize(("current", "last", "expected", "result"), [
    (3, -1, None, (4, -1)),    # a new producer: bump, forget the last epoch
    (3, -1, 3, (4, 3)),        # KIP-360: the producer's own epoch: bump, remember it
    (-1, -1, 9, (0, -1)),      # no epoch yet: any expected epoch starts at 0
    (4, 3, 3, (4, 3)),         # the last epoch: a retry, answered with the current one
    (4, 3, 2, ErrorCode.producer_fenced),
])
def test_increment_producer_epoch(current: int, last: int, expected: int | None,
                                  result: tuple[int, int] | ErrorCode) -> None:
    md = fresh(producer_epoch=current, last_producer_epoch=last)
    transit = md.prepare_increment_producer_epoch(10_000, expected, T)
    if isinstance(result, ErrorCode):
        assert transit == result and md.pending_state is None
    else:
        assert not isinstance(transit, ErrorCode)
        assert (transit.producer_epoch, transit.last_producer_epoch) == result


def test_epoch_exhaustion() -> None:
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766) and is_epoch_exhausted(32767)
    with pytest.raises(IllegalTransactionTransition):
        fresh(producer_epoch=32766).prepare_increment_producer_epoch(1, None, T)
    md = fresh(producer_epoch=32766)
    transit = md.prepare_producer_id_rotation(51, 1, T, record_last_epoch=True)
    assert (transit.producer_id, transit.producer_epoch, transit.last_producer_epoch) == (
        51, 0, 32766)
    apply(md, transit)
    assert (md.producer_id, md.prev_producer_id) == (51, 50)


def test_no_rotation_with_a_transaction_open() -> None:
    with pytest.raises(IllegalTransactionTransition):
        fresh(state=S.ONGOING).prepare_producer_id_rotation(51, 1, T, record_last_epoch=False)


def test_fence_bumps_once_even_after_a_failed_fence() -> None:
    md = fresh(producer_epoch=4, state=S.ONGOING)
    assert md.prepare_fence_producer_epoch().producer_epoch == 5
    md.abort_pending_transition()
    md.has_failed_epoch_fence = True
    assert md.prepare_fence_producer_epoch().producer_epoch == 4
    with pytest.raises(IllegalTransactionTransition):
        fresh(producer_epoch=32767, state=S.ONGOING).prepare_fence_producer_epoch()


def test_a_fence_is_never_completed() -> None:
    md = fresh(producer_epoch=4, state=S.ONGOING)
    transit = md.prepare_fence_producer_epoch()
    with pytest.raises(IllegalTransactionTransition):
        md.complete_transition_to(transit)


def test_dead_is_never_completed() -> None:
    md = fresh(state=S.COMPLETE_COMMIT, txn_start_timestamp=T)
    transit = md.prepare_dead()
    assert transit.txn_state is S.DEAD
    with pytest.raises(IllegalTransactionTransition):
        md.complete_transition_to(transit)


@pytest.mark.parametrize(("state", "target"), [
    (S.EMPTY, S.PREPARE_COMMIT), (S.PREPARE_COMMIT, S.ONGOING), (S.ONGOING, S.EMPTY),
    (S.PREPARE_ABORT, S.PREPARE_COMMIT)])
def test_invalid_moves_are_refused(state: TransactionState, target: TransactionState) -> None:
    md = fresh(state=state, producer_epoch=1, txn_start_timestamp=T)
    with pytest.raises(IllegalTransactionTransition):
        if target is S.PREPARE_COMMIT:
            md.prepare_abort_or_commit(target, TV0, -1, T, False)
        elif target is S.ONGOING:
            md.prepare_add_partitions(TP, T, TV0)
        else:
            md.prepare_increment_producer_epoch(1, None, T)
    assert md.pending_state is None


def test_complete_refuses_a_transit_that_is_not_the_pending_one() -> None:
    md = fresh(producer_epoch=0)
    transit = md.prepare_add_partitions(TP, T, TV0)
    md.abort_pending_transition()
    with pytest.raises(IllegalTransactionTransition):
        md.complete_transition_to(transit)


def test_complete_refuses_an_epoch_that_moved() -> None:
    md = fresh(producer_epoch=0)
    transit = md.prepare_add_partitions(TP, T, TV0)
    md.producer_epoch = 3  # something else changed the metadata meanwhile
    with pytest.raises(IllegalTransactionTransition):
        md.complete_transition_to(transit)


def test_v2_abort_from_settled_states_starts_its_transaction_now() -> None:
    for state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        md = fresh(state=state, producer_epoch=2, txn_start_timestamp=T)
        transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, -1, T + 9, True)
        apply(md, transit)
        assert (md.state, md.producer_epoch, md.txn_start_timestamp) == (
            S.PREPARE_ABORT, 3, T + 9)
    with pytest.raises(IllegalTransactionTransition):
        fresh(state=S.EMPTY).prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, -1, T, True)
