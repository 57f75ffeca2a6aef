"""Transaction verification rules (KIP-890): what a partition leader asks the transaction
coordinator before a transactional append, and how the answer reaches the producer.

Kafka's ``TransactionSupportedOperation`` and the error translations of
``AddPartitionsToTxnManager`` and ``ReplicaManager.handleProduceAppend``:

================  ============================  ==========================================
operation         chosen by                     what is asked
================  ============================  ==========================================
DEFAULT_ERROR     Produce v3-10, TxnOffsetCommit verify only; TRANSACTION_ABORTABLE reaches
                  v0-3                          the producer as INVALID_TXN_STATE (old clients)
GENERIC_ERROR     Produce v11, TxnOffsetCommit  verify only; TRANSACTION_ABORTABLE as is
                  v4
ADD_PARTITION     Produce v12+, TxnOffsetCommit the coordinator *adds* the partition (a
                  v5+ with transactions v2      transactions v2 client never sends
                  finalized                     AddPartitionsToTxn / AddOffsetsToTxn itself)
================  ============================  ==========================================

A v12+ request while ``transaction.version`` is below 2 is verified only (GENERIC_ERROR).

Answers (``coordinator_error``, per partition): CLUSTER_AUTHORIZATION_FAILED for the whole
request becomes INVALID_TXN_STATE (the producer must not see a broker's authorization),
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (what producers handle here). Then
``produce_error``: INVALID_TXN_STATE keeps its code with Kafka's message; the retriable ones
(CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) become NOT_ENOUGH_REPLICAS, which every producer
retries without a metadata refresh. ``txn_offset_commit_error``: the retriable ones become
COORDINATOR_NOT_AVAILABLE, which the producer's TxnOffsetCommit handler retries. Pure.
"""

from __future__ import annotations

import enum
from typing import Final

from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode

FIRST_PRODUCE_VERSION_WITH_TRANSACTION_ABORTABLE: Final = 11
FIRST_PRODUCE_VERSION_OF_TV_2: Final = 12
FIRST_TXN_OFFSET_COMMIT_VERSION_WITH_TRANSACTION_ABORTABLE: Final = 4
FIRST_TXN_OFFSET_COMMIT_VERSION_OF_TV_2: Final = 5
ADD_PARTITIONS_TO_TXN_BROKER_VERSION: Final = 5
"""The inter-broker AddPartitionsToTxn version a leader sends (v4+: by transaction, verify_only;
v5 knows TRANSACTION_ABORTABLE and, not verify-only, adds as transactions v2)."""

NOT_ADDED_MESSAGE: Final = "Partition was not added to the transaction"
_RETRIABLE: Final = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
})


class TransactionSupportedOperation(enum.Enum):
    DEFAULT_ERROR = "defaultError"
    GENERIC_ERROR = "genericError"
    ADD_PARTITION = "addPartition"

    @property
    def verify_only(self) -> bool:
        return self is not TransactionSupportedOperation.ADD_PARTITION


def _operation(version: int, first_generic: int, first_tv2: int,
               level: TransactionVersion) -> TransactionSupportedOperation:
    if version >= first_tv2 and level >= TransactionVersion.TV_2:
        return TransactionSupportedOperation.ADD_PARTITION
    if version >= first_generic:
        return TransactionSupportedOperation.GENERIC_ERROR
    return TransactionSupportedOperation.DEFAULT_ERROR


def operation_for_produce(version: int,
                          level: TransactionVersion) -> TransactionSupportedOperation:
    return _operation(version, FIRST_PRODUCE_VERSION_WITH_TRANSACTION_ABORTABLE,
                      FIRST_PRODUCE_VERSION_OF_TV_2, level)


def operation_for_txn_offset_commit(version: int,
                                    level: TransactionVersion) -> TransactionSupportedOperation:
    return _operation(version, FIRST_TXN_OFFSET_COMMIT_VERSION_WITH_TRANSACTION_ABORTABLE,
                      FIRST_TXN_OFFSET_COMMIT_VERSION_OF_TV_2, level)


def coordinator_error(error: int, operation: TransactionSupportedOperation) -> ErrorCode:
    """A partition's answer from the coordinator as the leader passes it on (NONE: verified)."""
    code = ErrorCode(error)
    if code == ErrorCode.cluster_authorization_failed:
        return ErrorCode.invalid_txn_state
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if (code == ErrorCode.transaction_abortable
            and operation is TransactionSupportedOperation.DEFAULT_ERROR):
        return ErrorCode.invalid_txn_state
    return code


def produce_error(error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """A failed verification as a Produce partition answer: (code, message)."""
    if error == ErrorCode.invalid_txn_state:
        return error, NOT_ADDED_MESSAGE
    if error in _RETRIABLE:
        return (ErrorCode.not_enough_replicas,
                "Unable to verify the partition has been added to the transaction. "
                f"Underlying error: {error.name.upper()}")
    return error, None


def txn_offset_commit_error(error: ErrorCode) -> ErrorCode:
    """A failed verification as a TxnOffsetCommit partition answer."""
    return ErrorCode.coordinator_not_available if error in _RETRIABLE else error
