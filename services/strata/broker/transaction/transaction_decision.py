"""The decisions ``TransactionCoordinator`` returns, and the errors it speaks.

A ``Decision`` is either an ``Answer`` (reply now) or a ``WriteTxnLog`` (append this record to
``__transaction_state``, then ``TransactionCoordinator.complete_write``), whose ``Purpose`` says
who waits and what follows; ``complete_write`` returns a ``WriteOutcome``. Immutable values.
``fenced_error_for_version`` is the last step of the transactional handlers: PRODUCER_FENCED
becomes INVALID_PRODUCER_EPOCH for clients that predate it (Kafka's ``KafkaApis`` does this).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnTransitMetadata,
)
from strata.broker.transaction.transaction_state import TransactionResult
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

# The first version of each API that understands PRODUCER_FENCED.
_FIRST_VERSION_WITH_PRODUCER_FENCED: Final[dict[int, int]] = {
    ApiKey.INIT_PRODUCER_ID: 4, ApiKey.END_TXN: 2, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
}


def fenced_error_for_version(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED as an older client understands it (INVALID_PRODUCER_EPOCH)."""
    first = _FIRST_VERSION_WITH_PRODUCER_FENCED.get(api_key)
    if error == ErrorCode.producer_fenced and first is not None and api_version < first:
        return ErrorCode.invalid_producer_epoch
    return error


class ProducerIdUnavailableError(Exception):
    """The allocator has no producer id to hand out right now."""

    def __init__(self, message: str = "no producer id available yet",
                 error_code: ErrorCode = ErrorCode.coordinator_load_in_progress) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Answer:
    """Reply with this (EndTxn v5+ and InitProducerId carry the producer id and epoch)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class Purpose(enum.Enum):
    """Who waits for a ``WriteTxnLog`` and what follows it."""

    INIT_PRODUCER_ID = "answer InitProducerId with the producer id and epoch written"
    ADD_PARTITIONS = "answer AddPartitionsToTxn / AddOffsetsToTxn"
    END_TXN = "answer EndTxn, then write the markers"
    FENCE = "InitProducerId fenced an open transaction: write its abort markers, answer " \
            "CONCURRENT_TRANSACTIONS so the producer retries"
    TIMEOUT_ABORT = "abort of a timed-out transaction: write its markers; nobody waits"
    COMPLETE = "every marker written: the transaction completes; nobody waits"


@dataclass(frozen=True, slots=True)
class WriteTxnLog:
    """Append ``key``/``value`` to ``__transaction_state`` partition ``txn_partition``, then
    ``TransactionCoordinator.complete_write``."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    transit: TxnTransitMetadata
    purpose: Purpose
    key: bytes
    value: bytes
    result: TransactionResult | None = None
    producer_id: int = NO_PRODUCER_ID
    """The producer id and epoch EndTxn (or the coordinator) named: re-checked after the
    append."""
    producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0
    is_epoch_fence: bool = False


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    answer: Answer | None = None
    """The reply to the client waiting for the write (None: nobody waits)."""
    markers: PendingCompleteTxn | None = None
    """Markers to write (``TransactionMarkerBook.add``)."""
    retry: bool = False
    """Append the same record again (a completion whose append was not available)."""
    error: ErrorCode = ErrorCode.none
    """The coordinator's error of the write (for logging when nobody waits)."""


Decision = Answer | WriteTxnLog
