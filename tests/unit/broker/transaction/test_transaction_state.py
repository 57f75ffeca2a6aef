"""Kafka's transaction states: ids in the log, names, and the allowed transitions."""

from __future__ import annotations

import pytest

from strata.broker.transaction.transaction_state import (
    VALID_PREVIOUS_STATES,
    TransactionResult,
    TransactionState,
    can_transition,
)
from strata.broker.transaction.transaction_version import TransactionVersion

S = TransactionState


def test_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert all(S.from_id(s.id) is s and S.from_name(s.state_name) is s for s in S)
    assert S.from_name("Bogus") is None
    assert str(S.PREPARE_COMMIT) == "PrepareCommit"


@pytest.mark.parametrize("state_id", [-1, 8, 127])
def test_an_unknown_id_is_refused(state_id: int) -> None:
    with pytest.raises(ValueError):
        S.from_id(state_id)


def test_expiration_is_allowed_only_without_a_transaction() -> None:
    assert {s for s in S if s.expiration_allowed} == {
        S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_valid_previous_states_are_kafka_4s() -> None:
    assert {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                          S.COMPLETE_ABORT},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    } == VALID_PREVIOUS_STATES
    assert can_transition(S.ONGOING, S.PREPARE_COMMIT)
    assert not can_transition(S.EMPTY, S.PREPARE_COMMIT)
    assert not can_transition(S.PREPARE_COMMIT, S.ONGOING)


def test_results_map_to_their_states() -> None:
    assert TransactionResult.COMMIT.value is True and TransactionResult.ABORT.value is False
    assert TransactionResult.COMMIT.prepare_state is S.PREPARE_COMMIT
    assert TransactionResult.ABORT.complete_state is S.COMPLETE_ABORT


def test_transaction_versions() -> None:
    tv = TransactionVersion
    assert [v.transaction_log_value_version for v in tv] == [0, 1, 1]
    assert [v.supports_epoch_bump for v in tv] == [False, False, True]
    assert tv.from_feature_level(5) is tv.TV_2
    with pytest.raises(ValueError):
        tv.from_feature_level(-1)
