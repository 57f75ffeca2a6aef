"""KIP-890's operation per request version and the error translations a partition leader
applies to the coordinator's answer (Kafka's AddPartitionsToTxnManager / ReplicaManager)."""

from __future__ import annotations

import pytest

from strata.broker.transaction.transaction_verification import (
    NOT_ADDED_MESSAGE,
    TransactionSupportedOperation,
    coordinator_error,
    operation_for_produce,
    operation_for_txn_offset_commit,
    produce_error,
    txn_offset_commit_error,
)
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

DEFAULT = TransactionSupportedOperation.DEFAULT_ERROR
GENERIC = TransactionSupportedOperation.GENERIC_ERROR
ADD = TransactionSupportedOperation.ADD_PARTITION
TV1, TV2 = TransactionVersion.TV_1, TransactionVersion.TV_2


@pytest.mark.parametrize(("version", "level", "operation"), [
    (3, TV2, DEFAULT), (10, TV2, DEFAULT), (11, TV2, GENERIC), (12, TV2, ADD), (13, TV2, ADD),
    (12, TV1, GENERIC), (13, TV1, GENERIC),
])
def test_produce_versions(version: int, level: TransactionVersion,
                          operation: TransactionSupportedOperation) -> None:
    assert operation_for_produce(version, level) is operation
    assert operation.verify_only is (operation is not ADD)


@pytest.mark.parametrize(("version", "level", "operation"), [
    (0, TV2, DEFAULT), (3, TV2, DEFAULT), (4, TV2, GENERIC), (5, TV2, ADD), (5, TV1, GENERIC),
])
def test_txn_offset_commit_versions(version: int, level: TransactionVersion,
                                    operation: TransactionSupportedOperation) -> None:
    assert operation_for_txn_offset_commit(version, level) is operation


def test_coordinator_answers_as_the_producer_sees_them() -> None:
    assert coordinator_error(ErrorCode.none, GENERIC) == ErrorCode.none
    assert coordinator_error(ErrorCode.cluster_authorization_failed, ADD) == (
        ErrorCode.invalid_txn_state)
    assert coordinator_error(ErrorCode.producer_fenced, GENERIC) == (
        ErrorCode.invalid_producer_epoch)
    assert coordinator_error(ErrorCode.transaction_abortable, DEFAULT) == (
        ErrorCode.invalid_txn_state)
    assert coordinator_error(ErrorCode.transaction_abortable, GENERIC) == (
        ErrorCode.transaction_abortable)


@pytest.mark.parametrize("retriable", [
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator])
def test_retriable_failures_are_retried_by_every_producer(retriable: ErrorCode) -> None:
    code, message = produce_error(retriable)
    assert code == ErrorCode.not_enough_replicas
    assert message is not None and retriable.name.upper() in message
    assert txn_offset_commit_error(retriable) == ErrorCode.coordinator_not_available


def test_not_in_the_transaction_keeps_its_code_with_kafkas_message() -> None:
    assert produce_error(ErrorCode.invalid_txn_state) == (ErrorCode.invalid_txn_state,
                                                          NOT_ADDED_MESSAGE)
    assert produce_error(ErrorCode.invalid_producer_epoch) == (
        ErrorCode.invalid_producer_epoch, None)
    assert txn_offset_commit_error(ErrorCode.transaction_abortable) == (
        ErrorCode.transaction_abortable)
