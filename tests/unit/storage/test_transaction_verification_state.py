"""KIP-890 verification guards in the producer state: a transactional batch of a producer with
no open transaction needs the guard of its verification; a marker (or the first transactional
append) ends the verification, so a guard taken before a marker cannot open a transaction after
it; a pending verification blocks higher sequences; stale verifications expire."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.storage.errors import InvalidTxnStateError, OutOfOrderSequenceError
from strata.storage.producer_state import ProducerStateManager
from strata.storage.record_batch import TRANSACTIONAL_FLAG_MASK, BatchHeader
from strata.storage.records import ControlRecordType, EndTransactionMarker
from strata.storage.verification_state import SENTINEL_GUARD, VerificationState

EXPIRATION_MS = 60_000
T0 = 1_700_000_000_000
PID = 42


def txn_header(epoch: int, base_seq: int, count: int = 1) -> BatchHeader:
    return BatchHeader(
        base_offset=0, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=TRANSACTIONAL_FLAG_MASK, last_offset_delta=count - 1, base_timestamp=T0,
        max_timestamp=T0, producer_id=PID, producer_epoch=epoch, base_sequence=base_seq,
        records_count=count)


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, EXPIRATION_MS)


def test_guards_are_unique_and_never_the_sentinel() -> None:
    a, b = VerificationState(T0, 0, 0), VerificationState(T0, 0, 0)
    assert SENTINEL_GUARD not in (a.guard, b.guard) and a.guard != b.guard
    assert a.verifies(a.guard) and not a.verifies(b.guard)
    assert not a.verifies(SENTINEL_GUARD)


def test_without_verification_in_use_nothing_changes(psm: ProducerStateManager) -> None:
    assert psm.check(txn_header(0, 0)) is None  # verification_guard None: not checked


def test_a_transactional_batch_needs_its_verification_guard(psm: ProducerStateManager) -> None:
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        psm.check(txn_header(0, 0), verification_guard=SENTINEL_GUARD)
    guard = psm.maybe_start_transaction_verification(PID, 0, 0, T0)
    with pytest.raises(InvalidTxnStateError):
        psm.check(txn_header(0, 0), verification_guard=guard + 1)
    assert psm.check(txn_header(0, 0), verification_guard=guard) is None


def test_an_open_transaction_needs_no_guard(psm: ProducerStateManager) -> None:
    guard = psm.maybe_start_transaction_verification(PID, 0, 0, T0)
    assert psm.check(txn_header(0, 0), verification_guard=guard) is None
    psm.update(txn_header(0, 0), 0, 0, T0)
    assert psm.verification_state(PID) is None  # the first offset guards from now on
    assert psm.maybe_start_transaction_verification(PID, 1, 0, T0) == SENTINEL_GUARD
    assert psm.check(txn_header(0, 1), verification_guard=SENTINEL_GUARD) is None


def test_a_guard_taken_before_a_marker_is_void_after_it(psm: ProducerStateManager) -> None:
    psm.update(txn_header(0, 0), 0, 0, T0)
    # The transaction is aborted while a late produce of the *next* transaction verifies.
    guard = psm.maybe_start_transaction_verification(PID, 1, 0, T0)
    assert guard == SENTINEL_GUARD  # still open when the produce arrived
    psm.update_marker(txn_header(0, -1), 1, EndTransactionMarker(ControlRecordType.ABORT, 0))
    with pytest.raises(InvalidTxnStateError):
        psm.check(txn_header(0, 1), verification_guard=guard)
    # The ABA case: a verification started, then a marker landed before the append.
    guard = psm.maybe_start_transaction_verification(PID, 1, 0, T0)
    psm.update_marker(txn_header(0, -1), 2, EndTransactionMarker(ControlRecordType.COMMIT, 0))
    assert psm.verification_state(PID) is None
    with pytest.raises(InvalidTxnStateError):
        psm.check(txn_header(0, 1), verification_guard=guard)


def test_a_pending_verification_blocks_higher_sequences(psm: ProducerStateManager) -> None:
    guard = psm.maybe_start_transaction_verification(PID, 5, 0, T0)
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        psm.check(txn_header(0, 6), verification_guard=guard)
    assert psm.maybe_start_transaction_verification(PID, 3, 0, T0) == guard  # lower: kept
    assert psm.verification_state(PID).lowest_sequence == 3  # type: ignore[union-attr]
    psm.maybe_start_transaction_verification(PID, 9, 1, T0)  # a bumped epoch resets it
    state = psm.verification_state(PID)
    assert state is not None and (state.epoch, state.lowest_sequence) == (1, 9)


def test_stale_verifications_expire(psm: ProducerStateManager) -> None:
    psm.maybe_start_transaction_verification(PID, 0, 0, T0)
    psm.remove_expired_producers(T0 + EXPIRATION_MS - 1)
    assert psm.verification_state(PID) is not None
    psm.remove_expired_producers(T0 + EXPIRATION_MS)
    assert psm.verification_state(PID) is None
