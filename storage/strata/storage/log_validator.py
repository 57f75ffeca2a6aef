"""Produce-side validation of a client's record set, each failure mapped to its Kafka error.

Pure: bytes and a config in, a ``ValidationResult`` out or the first error raised; no I/O and no
mutation of the record set. The Log calls ``validate_records`` on the leader before assigning
offsets (Kafka's ``UnifiedLog.analyzeAndValidateRecords`` + ``LogValidator``). It works per
batch on the header alone; it reads records only for a compacted topic (every record needs a
key) or with ``deep=True`` (tests, fuzzing).

Checks, in order, per batch (the error class carries the Kafka error code):

==========================================================  =================================
the record set is empty                                     INVALID_RECORD
truncated header, bad length, unknown magic, set ends       CORRUPT_MESSAGE
inside a batch
magic 0 or 1 (legacy MessageSet)                            UNSUPPORTED_FOR_MESSAGE_FORMAT
batch size > ``max.message.bytes``                          MESSAGE_TOO_LARGE
CRC32C mismatch                                             CORRUPT_MESSAGE
``baseOffset`` != 0 (clients always send 0)                 INVALID_RECORD
``recordsCount`` < 1 or ``lastOffsetDelta`` != count - 1    INVALID_RECORD
control batch from a client (only the coordinator writes     INVALID_RECORD
those: ``control_allowed``)
producer id set but ``baseSequence`` < 0 (client only)      INVALID_RECORD
codec id > 4                                                UNSUPPORTED_COMPRESSION_TYPE
timestamp type LogAppendTime set by the producer            INVALID_TIMESTAMP
CreateTime topic: ``baseTimestamp`` or ``maxTimestamp``     INVALID_TIMESTAMP
outside [now - before.max.ms, now + after.max.ms]
compacted topic: records without a key (all listed, with    INVALID_RECORD
their index in the batch, in ``record_errors``)
deep: record framing/count, decompression                   INVALID_RECORD / CORRUPT_MESSAGE
deep: record offset deltas not 0..count-1                   INVALID_RECORD
deep: any CreateTime record timestamp out of bounds         INVALID_TIMESTAMP
==========================================================  =================================

Timestamp bounds follow KIP-937: ``message.timestamp.before.max.ms`` and
``message.timestamp.after.max.ms``; a side left at Long.MAX falls back to the legacy
``message.timestamp.difference.max.ms`` (Kafka 3.6's rule). ``NO_TIMESTAMP`` (-1) is exempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strata.storage import record_batch as rb
from strata.storage.compression import CompressionType
from strata.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from strata.storage.log_config import LogConfig
from strata.storage.records import iter_records

LONG_MAX = (1 << 63) - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
NO_KEY_IN_COMPACTED_TOPIC = "Compacted topic cannot accept message without a key"


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    """The topic configs validation needs (Kafka's names in the field docs)."""

    max_message_bytes: int = 1048588  # max.message.bytes
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3600000  # message.timestamp.after.max.ms
    message_timestamp_difference_max_ms: int = LONG_MAX  # legacy, see module docstring
    compacted: bool = False  # cleanup.policy contains compact
    deep: bool = False  # walk every record of every batch

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidConfigError(
                f"message.timestamp.type must be {CREATE_TIME} or {LOG_APPEND_TIME}, "
                f"got {self.message_timestamp_type!r}"
            )

    @property
    def timestamp_bounds(self) -> tuple[int, int]:
        """``(before, after)`` max ms, legacy fallback applied."""
        return self.timestamp_before_max_ms, self.timestamp_after_max_ms

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime timestamp may be, legacy fallback applied."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime timestamp may be, legacy fallback applied."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """What the Log needs to append a validated record set.

    ``batches``: ``(position, header)`` of each batch, in order. ``max_timestamp``: the largest
    ``maxTimestamp`` (``now_ms`` under LogAppendTime; -1 if no batch has one).
    ``offset_delta_of_max_timestamp``: offset of the last record of the first batch holding
    ``max_timestamp``, relative to the first offset of the set (-1 with no timestamp).
    ``log_append_time``: the topic is LogAppendTime; after assigning offsets the Log calls
    ``record_batch.set_log_append_time`` on each batch.
    """

    batches: list[tuple[int, rb.BatchHeader]] = field(default_factory=list)
    record_count: int = 0
    max_timestamp: int = rb.NO_TIMESTAMP
    offset_delta_of_max_timestamp: int = -1
    log_append_time: bool = False


def _check_timestamp(timestamp: int, now_ms: int, before: int, after: int, what: str) -> None:
    if timestamp == rb.NO_TIMESTAMP:
        return
    diff = now_ms - timestamp
    if diff > before or -diff > after:
        raise InvalidTimestampError(
            f"{what} {timestamp} is out of range: it must be within "
            f"[{now_ms - before}, {now_ms + after}] (now {now_ms}, "
            f"message.timestamp.before.max.ms {before}, message.timestamp.after.max.ms {after})"
        )


def _validate_header(
    buf: rb.Buffer, pos: int, config: ValidationConfig, now_ms: int, control_allowed: bool
) -> rb.BatchHeader:
    # Hot path: one call per produced batch. Attribute bits are tested inline (not through
    # BatchHeader's properties) and the error branches build their messages only when taken.
    header = rb.parse_header(buf, pos)
    size = header.batch_length + rb.LOG_OVERHEAD
    if len(buf) - pos < size:
        raise CorruptRecordError(
            f"record set ends inside the batch at byte {pos}: "
            f"{len(buf) - pos} of {size} bytes present"
        )
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"the record batch size {size} bytes exceeds max.message.bytes "
            f"{config.max_message_bytes}"
        )
    if rb.compute_crc(buf, pos, size) != header.crc:
        raise CorruptRecordError(f"record batch at byte {pos} fails its CRC32C check")
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"the baseOffset of a produced record batch must be 0, got {header.base_offset}"
        )
    count = header.records_count
    if count < 1:
        raise InvalidRecordError(f"invalid record count {count} in record batch")
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"inconsistent lastOffsetDelta {header.last_offset_delta} for {count} records"
        )
    attributes = header.attributes
    if attributes & rb.CONTROL_FLAG_MASK and not control_allowed:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0 and not control_allowed:
        raise InvalidRecordError(
            f"invalid baseSequence {header.base_sequence} in a record batch with producerId "
            f"{header.producer_id}"
        )
    if attributes & rb.COMPRESSION_CODEC_MASK > _MAX_CODEC:
        CompressionType.for_id(attributes & rb.COMPRESSION_CODEC_MASK)  # raises the error
    if attributes & rb.TIMESTAMP_TYPE_MASK:
        raise InvalidTimestampError("producers must not set the timestamp type to LogAppendTime")
    if config.message_timestamp_type == CREATE_TIME:
        before, after = config.timestamp_bounds
        base_ts, max_ts = header.base_timestamp, header.max_timestamp
        if base_ts != rb.NO_TIMESTAMP and not -after <= now_ms - base_ts <= before:
            _check_timestamp(base_ts, now_ms, before, after, "baseTimestamp")
        if max_ts != rb.NO_TIMESTAMP and not -after <= now_ms - max_ts <= before:
            _check_timestamp(max_ts, now_ms, before, after, "maxTimestamp")
    return header


_MAX_CODEC = max(CompressionType)


def _validate_records(
    buf: rb.Buffer, pos: int, header: rb.BatchHeader, config: ValidationConfig, now_ms: int
) -> None:
    """The per-record checks: keys (compacted), and with ``deep`` offsets and timestamps."""
    check_ts = config.deep and config.message_timestamp_type == CREATE_TIME
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    keyless: list[int] = []
    for index, record in enumerate(iter_records(buf, pos, verify_crc=False)):
        if config.compacted and record.key is None:
            keyless.append(index)
            continue
        if config.deep and record.offset - header.base_offset != index:
            raise InvalidRecordError(
                f"record {index} has offsetDelta {record.offset - header.base_offset}, "
                f"expected {index}"
            )
        if check_ts:
            what = f"timestamp of record {index}"
            _check_timestamp(record.timestamp, now_ms, before, after, what)
    if keyless:
        raise _record_errors(tuple((index, NO_KEY_IN_COMPACTED_TOPIC) for index in keyless))


def _record_errors(errors: tuple[tuple[int, str], ...]) -> InvalidRecordError:
    """Kafka's ``LogValidator.processRecordErrors``: the batch refused, every record listed."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", errors)


def validate_records(
    records: bytes | bytearray | memoryview, config: ValidationConfig, now_ms: int,
    *, control_allowed: bool = False,
) -> ValidationResult:
    """Validate a produced record set; raise the first error (a ``StorageError`` subclass).
    ``control_allowed``: the coordinator's append (transaction markers); clients may not."""
    if len(records) == 0:
        raise InvalidRecordError("produce request holds no record batch")
    batches: list[tuple[int, rb.BatchHeader]] = []
    log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
    read_records = config.compacted or config.deep
    pos, end, count = 0, len(records), 0
    max_timestamp, delta_of_max = rb.NO_TIMESTAMP, -1
    while pos < end:
        header = _validate_header(records, pos, config, now_ms, control_allowed)
        if read_records:
            _validate_records(records, pos, header, config, now_ms)
        batch_max = now_ms if log_append_time else header.max_timestamp
        if batch_max > max_timestamp:
            max_timestamp, delta_of_max = batch_max, count + header.last_offset_delta
        batches.append((pos, header))
        count += header.records_count
        pos += header.batch_length + rb.LOG_OVERHEAD
    return ValidationResult(batches, count, max_timestamp, delta_of_max, log_append_time)


def validation_config(cfg: LogConfig) -> ValidationConfig:
    """The validation settings of a topic's ``LogConfig``."""
    return ValidationConfig(
        max_message_bytes=cfg.max_message_bytes,
        message_timestamp_type=cfg.message_timestamp_type,
        message_timestamp_before_max_ms=cfg.message_timestamp_before_max_ms,
        message_timestamp_after_max_ms=cfg.message_timestamp_after_max_ms,
        message_timestamp_difference_max_ms=cfg.message_timestamp_difference_max_ms,
        compacted=cfg.compact,
    )
