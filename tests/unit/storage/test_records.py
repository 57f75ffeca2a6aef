"""records: varints, building batches, iterating their records, control records, framing errors."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata.storage import record_batch as rb
from strata.storage.errors import CorruptRecordError, InvalidRecordError
from strata.storage.records import (
    ControlRecordType,
    Record,
    RecordSpec,
    build_batch,
    control_record_key,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    end_transaction_marker_value,
    iter_records,
    parse_control_key,
    parse_end_transaction_marker,
    records_section,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

SPECS = [
    RecordSpec(b"key-1", b"value-1", (("trace", b"abc"), ("empty", b""), ("null", None)), 1_000),
    RecordSpec(None, b"keyless", (), 1_005),
    RecordSpec(b"tombstone", None, (), 990),  # earlier than the first: negative delta
    RecordSpec(b"", b"", (), 1_010),  # empty, not null
]


def resign(buf: bytearray, pos: int = 0) -> bytearray:
    """Recompute the CRC after a test edits a batch on purpose."""
    size = rb.parse_header(buf, pos).size
    struct.pack_into(">I", buf, pos + rb.CRC_OFFSET, rb.compute_crc(buf, pos, size))
    return buf


# -------------------------------------------------------------------------------------- varints
@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
     (300, "d804"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)  # fmt: skip
def test_varint_vectors(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert decode_varlong(b"\x00" + encode_varlong(-(2**63)), 1) == (-(2**63), 11)


@given(INT32)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 5
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) <= 10
    assert decode_varlong(encoded) == (value, len(encoded))


def test_varint_range_on_encode() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(2**31)
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(-(2**63) - 1)


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_varint, b"", "truncated"),
        (decode_varint, b"\x80\x80", "truncated"),
        (decode_varint, b"\x80\x80\x80\x80\x80\x01", "longer than 5"),
        (decode_varint, b"\xff\xff\xff\xff\x1f", "32 bits"),
        (decode_varlong, b"\x80" * 10 + b"\x01", "longer than 10"),
        (decode_varlong, b"\xff" * 9 + b"\x03", "64 bits"),
    ],
)
def test_bad_varints(decode: object, data: bytes, message: str) -> None:
    assert callable(decode)
    with pytest.raises(InvalidRecordError, match=message):
        decode(data)


# ----------------------------------------------------------------------------- build + iterate
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_every_field(codec: int) -> None:
    buf = build_batch(SPECS, base_offset=100, compression=codec)
    h = rb.parse_and_verify(buf)
    assert h.compression == codec and h.records_count == 4 and h.last_offset_delta == 3
    assert (h.base_timestamp, h.max_timestamp) == (1_000, 1_010)
    got = list(iter_records(buf))
    assert got == [
        Record(100 + i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(SPECS)
    ]
    assert got[0].headers[2] == ("null", None) and got[3].key == b"" and got[2].value is None


def test_compressed_section_is_smaller_and_decompresses() -> None:
    specs = [RecordSpec(b"k%d" % i, b"v" * 500, timestamp=i) for i in range(50)]
    plain, zstd = build_batch(specs), build_batch(specs, compression=4)
    assert len(zstd) < len(plain) // 5
    h_plain, h_zstd = rb.parse_header(plain), rb.parse_header(zstd)
    assert records_section(zstd, 0, h_zstd) == records_section(plain, 0, h_plain)


def test_batch_attributes_and_producer_fields() -> None:
    buf = build_batch(
        [RecordSpec(b"k", b"v", timestamp=7)], producer_id=5, producer_epoch=2,
        base_sequence=40, partition_leader_epoch=3, is_transactional=True, compression=2,
    )  # fmt: skip
    h = rb.parse_and_verify(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 2, 40)
    assert h.partition_leader_epoch == 3 and h.is_transactional and not h.is_control
    assert h.compression == 2 and h.timestamp_type == 0


def test_explicit_offset_deltas_keep_offsets_across_a_rebuild() -> None:
    original = build_batch([RecordSpec(b"k%d" % i, b"v", timestamp=i) for i in range(6)],
                           base_offset=50)  # fmt: skip
    kept = [r for r in iter_records(original) if r.offset in (51, 54)]
    rebuilt = build_batch(kept, base_offset=50, last_offset_delta=5)
    h = rb.parse_and_verify(rebuilt)
    assert (h.records_count, h.last_offset_delta, h.next_offset) == (2, 5, 56)
    assert [(r.offset, r.key) for r in iter_records(rebuilt)] == [(51, b"k1"), (54, b"k4")]
    specs = [RecordSpec(b"a", offset_delta=2), RecordSpec(b"b"), RecordSpec(b"c", offset_delta=9)]
    assert [r.offset for r in iter_records(build_batch(specs))] == [2, 3, 9]


def test_empty_batch_keeps_its_offset_range() -> None:
    buf = build_batch([], base_offset=10, last_offset_delta=4, producer_id=1, producer_epoch=0,
                      base_sequence=7, base_timestamp=123)  # fmt: skip
    h = rb.parse_and_verify(buf)
    assert (h.records_count, h.last_offset, h.size) == (0, 14, rb.HEADER_SIZE)
    assert (h.base_timestamp, h.max_timestamp) == (123, 123)
    assert list(iter_records(buf)) == []


@pytest.mark.parametrize(
    ("specs", "kwargs", "message"),
    [
        ([], {}, "explicit last_offset_delta"),
        ([RecordSpec(offset_delta=3), RecordSpec(offset_delta=3)], {}, "does not follow"),
        ([RecordSpec(offset_delta=-1)], {}, "does not follow"),
        ([RecordSpec(), RecordSpec()], {"last_offset_delta": 0}, "below"),
        ([RecordSpec()], {"timestamp_type": 2}, "timestamp_type"),
        ([RecordSpec()], {"base_timestamp": 1, "delete_horizon_ms": 2}, "both"),
        ([RecordSpec(timestamp=2**63 - 1)], {"base_timestamp": -5}, "int64"),
    ],
)
def test_build_rejects_impossible_batches(
    specs: list[RecordSpec], kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_batch(specs, **kwargs)  # type: ignore[arg-type]


def test_log_append_time_batches_read_as_max_timestamp() -> None:
    buf = bytearray(build_batch(SPECS, compression=1))
    rb.set_log_append_time(buf, 0, 99_999)
    assert {r.timestamp for r in iter_records(buf)} == {99_999}
    again = build_batch(SPECS, timestamp_type=1)
    assert rb.parse_header(again).timestamp_type == 1
    assert {r.timestamp for r in iter_records(again)} == {1_010}


def test_delete_horizon_sets_bit_6_and_the_base_timestamp() -> None:
    buf = build_batch(SPECS, delete_horizon_ms=5_000)
    h = rb.parse_and_verify(buf)
    assert h.attributes & rb.DELETE_HORIZON_FLAG_MASK and h.base_timestamp == 5_000
    assert [r.timestamp for r in iter_records(buf)] == [s.timestamp for s in SPECS]


def test_iter_records_at_a_position() -> None:
    first = build_batch([RecordSpec(b"a")])
    second = build_batch([RecordSpec(b"b"), RecordSpec(b"c")], base_offset=1, compression=3)
    assert [r.key for r in iter_records(first + second, len(first))] == [b"b", b"c"]


def test_non_utf8_header_key_survives_a_rebuild() -> None:
    raw_key = b"caf\xe9"  # latin-1, not UTF-8
    buf = bytearray(build_batch([RecordSpec(b"k", b"v", (("x", b"1"),))]))
    at = buf.index(b"\x02x")  # header key length 1 (zigzag 2) then "x"
    buf[at : at + 2] = bytes([len(raw_key) * 2]) + raw_key
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    buf[rb.HEADER_SIZE] += 2 * (len(raw_key) - 1)  # record length varint, one byte here
    resign(buf)
    (record,) = iter_records(buf)
    rebuilt = build_batch([record])
    assert raw_key in rebuilt and list(iter_records(rebuilt)) == [record]


# -------------------------------------------------------------------------------- control records
def test_control_batch() -> None:
    key = control_record_key(ControlRecordType.COMMIT)
    value = end_transaction_marker_value(coordinator_epoch=17)
    buf = build_batch([RecordSpec(key, value, timestamp=1)], is_control=True,
                      is_transactional=True, producer_id=3, producer_epoch=1)  # fmt: skip
    h = rb.parse_and_verify(buf)
    assert h.is_control and h.is_transactional
    (record,) = iter_records(buf)
    assert parse_control_key(record.key) == (0, ControlRecordType.COMMIT)
    assert parse_end_transaction_marker(record.value) == (0, 17)
    assert parse_control_key(control_record_key(ControlRecordType.ABORT)) == (0, 0)


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_bad_control_keys(key: bytes | None) -> None:
    with pytest.raises(InvalidRecordError, match="control record key"):
        parse_control_key(key)


def test_bad_end_transaction_marker() -> None:
    with pytest.raises(InvalidRecordError, match="marker"):
        parse_end_transaction_marker(b"\x00\x00\x00")


# ------------------------------------------------------------------------------- framing errors
def test_more_records_declared_than_present() -> None:
    buf = bytearray(build_batch(SPECS))
    struct.pack_into(">i", buf, 57, 5)
    with pytest.raises(InvalidRecordError, match="declares 5 records but holds 4"):
        list(iter_records(resign(buf)))


def test_fewer_records_declared_than_present() -> None:
    buf = bytearray(build_batch(SPECS))
    struct.pack_into(">i", buf, 57, 3)
    with pytest.raises(InvalidRecordError, match="remain after the 3 records"):
        list(iter_records(resign(buf)))


def test_record_length_disagreeing_with_its_fields() -> None:
    buf = bytearray(build_batch([RecordSpec(b"k", b"value")]))
    buf[rb.HEADER_SIZE] += 2  # length one more than the fields take ...
    buf += b"\x00"  # ... with a spare byte so the section still holds it
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    with pytest.raises(InvalidRecordError, match="length says"):
        list(iter_records(resign(buf)))


def test_truncated_records_section() -> None:
    buf = bytearray(build_batch([RecordSpec(b"k", b"value")]))
    del buf[-3:]
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    with pytest.raises(InvalidRecordError, match="overruns"):
        list(iter_records(resign(buf)))


def test_crc_is_checked_unless_skipped() -> None:
    buf = bytearray(build_batch(SPECS))
    buf[buf.index(b"keyless")] ^= 0x01  # a value byte: the records stay well-formed
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_records(buf))
    assert len(list(iter_records(buf, verify_crc=False))) == 4


def test_truncated_batch_is_corrupt_even_without_crc() -> None:
    buf = build_batch(SPECS)
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(iter_records(buf[:-1], verify_crc=False))


def test_undecodable_compressed_section_is_corrupt() -> None:
    buf = bytearray(build_batch(SPECS, compression=4))
    buf[rb.HEADER_SIZE : rb.HEADER_SIZE + 4] = b"nope"  # breaks the zstd magic
    with pytest.raises(CorruptRecordError, match="zstd"):
        list(iter_records(resign(buf)))
