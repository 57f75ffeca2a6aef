"""Storage errors, each carrying the Kafka error code a request handler answers with.

One exception class per Kafka error the storage core can raise (aiokafka's pattern): the broker
maps ``err.error_code`` straight onto the per-partition error of its response. Messages name the
problem precisely; they end up in broker logs and client-visible error messages.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class. ``error_code`` is Kafka's numeric code, ``error_name`` its name."""

    error_code: int = -1
    error_name: str = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(StorageError):
    error_code = 1
    error_name = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(StorageError):
    """Bad framing, size or CRC of a record batch."""

    error_code = 2
    error_name = "CORRUPT_MESSAGE"


class RecordTooLargeError(StorageError):
    error_code = 10
    error_name = "MESSAGE_TOO_LARGE"


class InvalidTimestampError(StorageError):
    error_code = 32
    error_name = "INVALID_TIMESTAMP"


class UnsupportedForMessageFormatError(StorageError):
    """Magic 0 or 1 record sets (Kafka 4 rejects them too)."""

    error_code = 43
    error_name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class OutOfOrderSequenceError(StorageError):
    error_code = 45
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(StorageError):
    error_code = 46
    error_name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    error_code = 47
    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer whose transaction is still open."""

    error_code = 48
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than the one the partition saw."""

    error_code = 52
    error_name = "TRANSACTION_COORDINATOR_FENCED"


class KafkaStorageError(StorageError):
    """A disk error (ENOSPC, EIO...): the write was not acknowledged; the log dir goes offline."""

    error_code = 56
    error_name = "KAFKA_STORAGE_ERROR"


class UnknownProducerIdError(StorageError):
    error_code = 59
    error_name = "UNKNOWN_PRODUCER_ID"


class UnsupportedCompressionTypeError(StorageError):
    error_code = 76
    error_name = "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(StorageError):
    """Count mismatch, a client-sent control batch, a keyless record in a compacted topic.

    ``record_errors`` lists the offending records as ``(batch_index, message)`` when the
    refusal is about records rather than the batch (ProduceResponse v8+ ``record_errors``,
    KIP-467); the whole batch is refused either way."""

    error_code = 87
    error_name = "INVALID_RECORD"

    def __init__(self, message: str,
                 record_errors: tuple[tuple[int, str | None], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class LogDirOfflineError(KafkaStorageError):
    """The partition's log dir was taken offline after an earlier disk error."""


class InvalidConfigError(StorageError):
    """A config value of the wrong type or out of range, or an unknown topic config name."""

    error_code = 40
    error_name = "INVALID_CONFIG"
