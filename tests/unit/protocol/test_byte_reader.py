"""``ByteReader``: the primitives every coordinator record decoder reads through."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

import pytest

from strata.protocol.byte_reader import ByteReader
from strata.protocol.primitives import write_uvarint


class Malformed(ValueError):
    pass


def reader(data: bytes, *, compact: bool = False) -> ByteReader:
    return ByteReader(data, Malformed, compact=compact)


def test_fixed_width_integers_and_uuid_in_order() -> None:
    topic_id = uuid.uuid4()
    r = reader(struct.pack(">bhiq", -1, -2, -3, -4) + topic_id.bytes)
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uuid()) == (-1, -2, -3, -4, topic_id)
    assert r.at_end and r.remaining == 0


def test_non_compact_lengths_use_int16_and_int32_with_minus_one_for_null() -> None:
    data = (struct.pack(">h", 3) + b"abc" + struct.pack(">h", -1)
            + struct.pack(">i", 2) + b"\x01\x02" + struct.pack(">i", -1)
            + struct.pack(">i", 1) + struct.pack(">i", -1))
    r = reader(data)
    assert r.string() == "abc"
    assert r.nullable_string() is None
    assert r.bytes_() == b"\x01\x02"
    assert r.nullable_bytes() is None
    assert r.array_length() == 1
    assert r.nullable_array_length() == -1
    assert r.tagged_fields() == {}  # a non-compact structure has no tag buffer
    assert r.at_end


def test_compact_lengths_are_varints_plus_one_and_tags_are_read() -> None:
    data = (write_uvarint(4) + b"xyz" + write_uvarint(0) + write_uvarint(3) + b"\x07\x08"
            + write_uvarint(0) + write_uvarint(2) + write_uvarint(1) + write_uvarint(2) + b"hi"
            + write_uvarint(9) + write_uvarint(0))
    r = reader(data, compact=True)
    assert r.string() == "xyz"
    assert r.nullable_string() is None
    assert r.bytes_() == b"\x07\x08"
    assert r.nullable_array_length() == -1
    assert r.tagged_fields() == {1: b"hi", 9: b""}
    assert r.at_end


@pytest.mark.parametrize(("data", "compact", "read", "message"), [
    (b"\x00", False, ByteReader.int16, "truncated"),
    (b"\x00\x05ab", False, ByteReader.string, "truncated"),
    (b"\xff\xff", False, ByteReader.string, "null at offset 0 where a string is required"),
    (b"\xff\xff\xff\xff", False, ByteReader.bytes_, "null at offset 0 where bytes are required"),
    (b"\xff\xfe", False, ByteReader.nullable_string, "negative string length -2"),
    (b"\x00\x02\xff\xfe", False, ByteReader.string, "not UTF-8"),
    (b"\xff\xff\xff\xff\xff\x01", True, ByteReader.uvarint, "longer than 5 bytes"),
    (b"\xff", True, ByteReader.uvarint, "truncated"),
    (struct.pack(">i", 1000) + b"\x00" * 8, False, ByteReader.array_length, "cannot fit"),
    (write_uvarint(1) + write_uvarint(3) + write_uvarint(5) + b"ab", True,
     ByteReader.tagged_fields, "truncated"),
])
def test_malformed_input_raises_the_callers_error_naming_the_problem(
        data: bytes, compact: bool, read: Callable[[ByteReader], object], message: str) -> None:
    r = reader(data, compact=compact)
    with pytest.raises(Malformed, match=message):
        read(r)


def test_the_reader_starts_where_asked() -> None:
    r = ByteReader(b"\x00\x00\x00\x07", Malformed, pos=2)
    assert r.int16() == 7
