"""log_validator: happy paths, and one test per Kafka error a produced record set can earn."""

import struct

import pytest

from strata.storage import record_batch as rb
from strata.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    StorageError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from strata.storage.log_validator import (
    LONG_MAX,
    ValidationConfig,
    ValidationResult,
    validate_records,
)
from strata.storage.records import (
    ControlRecordType,
    RecordSpec,
    build_batch,
    control_record_key,
    end_transaction_marker_value,
)

NOW = 1_700_000_000_000
HOUR = 3_600_000
CONFIG = ValidationConfig()


def specs(n: int, ts: int = NOW, key: bytes | None = b"k") -> list[RecordSpec]:
    return [RecordSpec(key, b"value-%d" % i, timestamp=ts + i) for i in range(n)]


def resign(buf: bytearray, pos: int = 0) -> bytes:
    size = rb.parse_header(buf, pos).size
    struct.pack_into(">I", buf, pos + rb.CRC_OFFSET, rb.compute_crc(buf, pos, size))
    return bytes(buf)


def patched(batch: bytes, fmt: str, offset: int, value: int) -> bytes:
    """``batch`` with one header field overwritten and the CRC recomputed."""
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    return resign(buf)


def expect(error: type[StorageError], code: int, records: bytes, config: ValidationConfig = CONFIG,
           match: str | None = None) -> None:  # fmt: skip
    with pytest.raises(error, match=match) as exc:
        validate_records(records, config, NOW)
    assert exc.value.error_code == code


# ---------------------------------------------------------------------------------- happy paths
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_one_batch(codec: int) -> None:
    batch = build_batch(specs(3), compression=codec)
    result = validate_records(batch, CONFIG, NOW)
    assert result == ValidationResult(
        batches=[(0, rb.parse_header(batch))], record_count=3, max_timestamp=NOW + 2,
        offset_delta_of_max_timestamp=2, log_append_time=False,
    )  # fmt: skip
    assert validate_records(bytearray(batch), CONFIG, NOW) == result
    assert validate_records(memoryview(batch), CONFIG, NOW) == result


def test_several_batches_and_where_the_max_timestamp_is() -> None:
    a = build_batch(specs(2, NOW - 50))
    b = build_batch(specs(3, NOW + 10), compression=3)  # holds the max: NOW + 12
    c = build_batch(specs(4, NOW - 10))
    result = validate_records(a + b + c, CONFIG, NOW)
    assert [pos for pos, _ in result.batches] == [0, len(a), len(a) + len(b)]
    assert result.record_count == 9
    assert result.max_timestamp == NOW + 12
    assert result.offset_delta_of_max_timestamp == 2 + 2  # last record of b, counted from a's first
    assert not result.log_append_time


def test_log_append_time_topic() -> None:
    config = ValidationConfig(message_timestamp_type="LogAppendTime")
    a, b = build_batch(specs(2, ts=5)), build_batch(specs(3, ts=NOW + 10 * HOUR))  # no bounds
    result = validate_records(a + b, config, NOW)
    assert result.log_append_time and result.max_timestamp == NOW
    assert result.offset_delta_of_max_timestamp == 1  # ties: the first batch's last record
    assert result.record_count == 5


def test_no_timestamp_is_exempt_from_bounds() -> None:
    result = validate_records(build_batch(specs(1, ts=-1)), CONFIG, NOW)
    assert result.max_timestamp == -1 and result.offset_delta_of_max_timestamp == -1


def test_idempotent_and_transactional_batches_pass() -> None:
    batch = build_batch(specs(2), producer_id=9, producer_epoch=0, base_sequence=0,
                        is_transactional=True)  # fmt: skip
    assert validate_records(batch, CONFIG, NOW).record_count == 2


@pytest.mark.parametrize("codec", [0, 2, 4])
def test_compacted_and_deep_accept_well_formed_batches(codec: int) -> None:
    batch = build_batch(specs(5), compression=codec)
    config = ValidationConfig(compacted=True, deep=True)
    assert validate_records(batch, config, NOW).record_count == 5


def test_timestamp_bounds_are_inclusive() -> None:
    config = ValidationConfig(message_timestamp_before_max_ms=1_000,
                              message_timestamp_after_max_ms=500)  # fmt: skip
    validate_records(build_batch([RecordSpec(b"k", timestamp=NOW - 1_000)]), config, NOW)
    validate_records(build_batch([RecordSpec(b"k", timestamp=NOW + 500)]), config, NOW)


def test_bad_timestamp_type_config() -> None:
    with pytest.raises(InvalidConfigError, match=r"message\.timestamp\.type"):
        ValidationConfig(message_timestamp_type="create")


# -------------------------------------------------------------------------- CORRUPT_MESSAGE (2)
def test_crc_mismatch() -> None:
    buf = bytearray(build_batch(specs(2)))
    buf[-2] ^= 0x10
    expect(CorruptRecordError, 2, bytes(buf), match="CRC")


@pytest.mark.parametrize("cut", [1, 11, 30, rb.HEADER_SIZE + 1])
def test_record_set_ending_inside_a_batch(cut: int) -> None:
    first = build_batch(specs(1))
    second = build_batch(specs(2))
    expect(CorruptRecordError, 2, first + second[:cut])


def test_unknown_magic() -> None:
    buf = bytearray(build_batch(specs(1)))
    buf[16] = 5  # magic lies outside the CRC
    expect(CorruptRecordError, 2, bytes(buf), match="magic")


def test_deep_catches_broken_record_framing() -> None:
    buf = bytearray(build_batch(specs(2)))
    buf[rb.HEADER_SIZE] += 2  # first record claims one byte more
    resigned = resign(buf)
    validate_records(resigned, CONFIG, NOW)  # the header alone is fine
    expect(InvalidRecordError, 87, resigned, ValidationConfig(deep=True))


def test_deep_catches_undecodable_compression() -> None:
    buf = bytearray(build_batch(specs(2), compression=1))
    buf[rb.HEADER_SIZE] ^= 0xFF  # gzip magic
    expect(CorruptRecordError, 2, resign(buf), ValidationConfig(deep=True), match="gzip")


# ------------------------------------------------------------ UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic(magic: int) -> None:
    message = bytes([magic, 0]) + struct.pack(">ii", -1, 3) + b"abc"
    if magic == 1:
        message = message[:2] + struct.pack(">q", NOW) + message[2:]
    legacy = struct.pack(">qiI", 0, 4 + len(message), 0) + message
    expect(UnsupportedForMessageFormatError, 43, legacy, match="RecordBatch v2")


# ----------------------------------------------------------------------- MESSAGE_TOO_LARGE (10)
def test_batch_over_max_message_bytes() -> None:
    batch = build_batch(specs(3))
    validate_records(batch, ValidationConfig(max_message_bytes=len(batch)), NOW)
    expect(RecordTooLargeError, 10, batch, ValidationConfig(max_message_bytes=len(batch) - 1),
           match="max.message.bytes")  # fmt: skip


# -------------------------------------------------------------------------- INVALID_RECORD (87)
def test_empty_record_set() -> None:
    expect(InvalidRecordError, 87, b"", match="no record batch")


def test_nonzero_base_offset() -> None:
    expect(InvalidRecordError, 87, build_batch(specs(1), base_offset=7), match="baseOffset")


def test_zero_records() -> None:
    empty = build_batch([], last_offset_delta=0, base_timestamp=NOW)
    expect(InvalidRecordError, 87, empty, match="record count 0")


def test_last_offset_delta_disagrees_with_count() -> None:
    expect(InvalidRecordError, 87, patched(build_batch(specs(3)), ">i", 23, 5),
           match="lastOffsetDelta")  # fmt: skip
    expect(InvalidRecordError, 87, build_batch(specs(2), last_offset_delta=4))


def test_control_batch_from_a_client() -> None:
    marker = RecordSpec(control_record_key(ControlRecordType.COMMIT),
                        end_transaction_marker_value(0), timestamp=NOW)  # fmt: skip
    batch = build_batch([marker], is_control=True, is_transactional=True, producer_id=1,
                        producer_epoch=0, base_sequence=0)  # fmt: skip
    expect(InvalidRecordError, 87, batch, match="control")


def test_producer_id_without_sequence() -> None:
    batch = build_batch(specs(1), producer_id=4, producer_epoch=0, base_sequence=-1)
    expect(InvalidRecordError, 87, batch, match="baseSequence")


def test_compacted_topic_needs_keys() -> None:
    keyed, keyless = build_batch(specs(2)), build_batch(specs(2, key=None), compression=2)
    validate_records(keyless, CONFIG, NOW)  # fine when not compacted
    expect(InvalidRecordError, 87, keyed + keyless, ValidationConfig(compacted=True),
           match="without a key")  # fmt: skip


def test_deep_checks_record_offset_deltas() -> None:
    deltas_0_2 = build_batch([RecordSpec(b"a", timestamp=NOW),
                              RecordSpec(b"b", offset_delta=2, timestamp=NOW)])  # fmt: skip
    gappy = patched(deltas_0_2, ">i", 23, 1)
    # The header is consistent (2 records, lastOffsetDelta 1); only the records are not.
    validate_records(gappy, CONFIG, NOW)
    expect(InvalidRecordError, 87, gappy, ValidationConfig(deep=True), match="offsetDelta")


def test_deep_checks_the_record_count() -> None:
    buf = patched(build_batch(specs(3)), ">i", 57, 2)
    buf = patched(buf, ">i", 23, 1)  # header says 2 records, consistently; 3 are there
    validate_records(buf, CONFIG, NOW)
    expect(InvalidRecordError, 87, buf, ValidationConfig(deep=True), match="remain")


# ------------------------------------------------------------ UNSUPPORTED_COMPRESSION_TYPE (76)
@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int) -> None:
    batch = patched(build_batch(specs(1)), ">h", 21, codec_id)
    expect(UnsupportedCompressionTypeError, 76, batch, match=str(codec_id))


# ----------------------------------------------------------------------- INVALID_TIMESTAMP (32)
def test_producer_set_log_append_time() -> None:
    buf = bytearray(build_batch(specs(1)))
    rb.set_log_append_time(buf, 0, NOW)
    expect(InvalidTimestampError, 32, bytes(buf), match="LogAppendTime")


def test_timestamp_too_far_in_the_future() -> None:
    expect(InvalidTimestampError, 32, build_batch(specs(1, NOW + HOUR + 1)), match="out of range")
    validate_records(build_batch(specs(1, NOW + HOUR)), CONFIG, NOW)


def test_timestamp_too_far_in_the_past() -> None:
    config = ValidationConfig(message_timestamp_before_max_ms=HOUR)
    expect(InvalidTimestampError, 32, build_batch(specs(1, NOW - HOUR - 1)), config)
    validate_records(build_batch(specs(1, 0)), CONFIG, NOW)  # Long.MAX by default


def test_base_timestamp_checked_as_well_as_max() -> None:
    old_first = [RecordSpec(b"a", timestamp=NOW - 10_000), RecordSpec(b"b", timestamp=NOW)]
    config = ValidationConfig(message_timestamp_before_max_ms=5_000)
    expect(InvalidTimestampError, 32, build_batch(old_first), config, match="baseTimestamp")


def test_deep_checks_every_record_timestamp() -> None:
    hidden = [RecordSpec(b"a", timestamp=NOW), RecordSpec(b"b", timestamp=NOW - 10_000),
              RecordSpec(b"c", timestamp=NOW)]  # fmt: skip
    config = ValidationConfig(message_timestamp_before_max_ms=5_000)
    validate_records(build_batch(hidden), config, NOW)  # base and max are in bounds
    deep = ValidationConfig(message_timestamp_before_max_ms=5_000, deep=True)
    expect(InvalidTimestampError, 32, build_batch(hidden), deep, match="record 1")


def test_legacy_difference_max_ms_fills_unset_sides() -> None:
    legacy = ValidationConfig(message_timestamp_difference_max_ms=1_000,
                              message_timestamp_after_max_ms=LONG_MAX)  # fmt: skip
    assert (legacy.timestamp_before_max_ms, legacy.timestamp_after_max_ms) == (1_000, 1_000)
    expect(InvalidTimestampError, 32, build_batch(specs(1, NOW - 1_001)), legacy)
    expect(InvalidTimestampError, 32, build_batch(specs(1, NOW + 1_001)), legacy)
    both = ValidationConfig(message_timestamp_difference_max_ms=1_000,
                            message_timestamp_before_max_ms=50_000)  # fmt: skip
    assert (both.timestamp_before_max_ms, both.timestamp_after_max_ms) == (50_000, HOUR)
    validate_records(build_batch(specs(1, NOW - 40_000)), both, NOW)


def test_log_append_time_topic_skips_timestamp_bounds() -> None:
    config = ValidationConfig(message_timestamp_type="LogAppendTime",
                              message_timestamp_before_max_ms=1)  # fmt: skip
    assert validate_records(build_batch(specs(1, ts=0)), config, NOW).log_append_time
