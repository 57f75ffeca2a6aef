"""record_batch: the v2 header, its CRC32C, in-place rewrites, and rejection of magic 0/1.

Batches here are packed by hand (struct + the crc32c package) so these tests do not lean on
``records.build_batch``; one test checks that builder's output against this header parser.
"""

import struct

import crc32c
import pytest

from strata.storage import record_batch as rb
from strata.storage.errors import CorruptRecordError, UnsupportedForMessageFormatError
from strata.storage.records import RecordSpec, build_batch

HEADER = struct.Struct(">qiibIhiqqqhii")


def raw_batch(
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    magic: int = 2,
    attributes: int = 0,
    last_offset_delta: int = 0,
    base_timestamp: int = 1_000,
    max_timestamp: int = 2_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    records_count: int = 1,
    body: bytes = b"\x0c\x00\x00\x00\x01\x00\x01\x00",  # any bytes: the header ignores them
    crc: int | None = None,
) -> bytearray:
    buf = bytearray(HEADER.size) + body
    HEADER.pack_into(
        buf, 0, base_offset, HEADER.size - 12 + len(body), partition_leader_epoch, magic, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
        producer_epoch, base_sequence, records_count,
    )  # fmt: skip
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])) if crc is None else crc)
    return buf


def test_parse_header_reads_every_field() -> None:
    buf = raw_batch(
        base_offset=42, partition_leader_epoch=7, attributes=0x3B, last_offset_delta=4,
        base_timestamp=1_500, max_timestamp=1_900, producer_id=99, producer_epoch=3,
        base_sequence=10, records_count=5,
    )  # fmt: skip
    h = rb.parse_header(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (42, 7, 2)
    assert h.batch_length == len(buf) - 12 and h.size == len(buf)
    assert (h.last_offset_delta, h.last_offset, h.next_offset) == (4, 46, 47)
    assert (h.base_timestamp, h.max_timestamp) == (1_500, 1_900)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (99, 3, 10)
    assert h.records_count == 5
    assert h.compression == 3  # 0x3B & 7
    assert h.timestamp_type == 1 and h.is_transactional and h.is_control
    assert h.has_producer_id and h.last_sequence == 14
    assert h.crc == crc32c.crc32c(bytes(buf[21:]))


def test_plain_attributes_and_no_producer() -> None:
    h = rb.parse_header(raw_batch())
    assert h.compression == 0 and h.timestamp_type == 0
    assert not h.is_transactional and not h.is_control and not h.has_producer_id
    assert h.last_sequence == rb.NO_SEQUENCE


def test_last_sequence_wraps_at_int32() -> None:
    h = rb.parse_header(raw_batch(producer_id=1, base_sequence=2**31 - 2, last_offset_delta=3))
    assert h.last_sequence == 1


def test_peek_size() -> None:
    buf = raw_batch()
    assert rb.peek_size(buf) == len(buf)
    assert rb.peek_size(buf[:11]) is None
    two = buf + raw_batch(body=b"x" * 50)
    assert rb.peek_size(two, len(buf)) == HEADER.size + 50


def test_parse_and_verify_accepts_valid_crc() -> None:
    buf = raw_batch()
    assert rb.parse_and_verify(buf) == rb.parse_header(buf)
    assert rb.is_valid_crc(buf, 0, rb.parse_header(buf))


@pytest.mark.parametrize("index", [21, 23, 30, 40, 57, 60, 61, 66])
def test_flipped_byte_under_crc_is_corrupt(index: int) -> None:
    buf = raw_batch()
    buf[index] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC") as exc:
        rb.parse_and_verify(buf)
    assert exc.value.error_code == 2 and exc.value.error_name == "CORRUPT_MESSAGE"


def test_base_offset_and_leader_epoch_lie_outside_the_crc() -> None:
    buf = raw_batch()
    buf[3] ^= 0xFF  # baseOffset
    buf[14] ^= 0xFF  # partitionLeaderEpoch
    rb.parse_and_verify(buf)


def test_wrong_stored_crc_is_corrupt() -> None:
    buf = raw_batch(crc=12345)
    with pytest.raises(CorruptRecordError):
        rb.parse_and_verify(buf)
    assert not rb.is_valid_crc(buf, 0, rb.parse_header(buf))


@pytest.mark.parametrize("cut", [0, 5, 16, 20, 60])
def test_truncated_header_is_corrupt(cut: int) -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        rb.parse_header(raw_batch()[:cut])


def test_truncated_batch_is_corrupt() -> None:
    buf = raw_batch(body=b"y" * 30)
    rb.parse_header(buf[:-1])  # the header alone is whole
    with pytest.raises(CorruptRecordError, match="truncated"):
        rb.parse_and_verify(buf[:-1])
    assert not rb.is_valid_crc(buf[:-1], 0, rb.parse_header(buf))


def test_batch_length_below_header_is_corrupt() -> None:
    buf = raw_batch()
    struct.pack_into(">i", buf, 8, 10)
    with pytest.raises(CorruptRecordError, match="below the header"):
        rb.parse_header(buf)


def test_negative_count_or_delta_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="negative"):
        rb.parse_header(raw_batch(records_count=-1))
    with pytest.raises(CorruptRecordError, match="negative"):
        rb.parse_header(raw_batch(last_offset_delta=-2))


@pytest.mark.parametrize("magic", [3, 7, 255])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    buf = raw_batch()
    buf[16] = magic
    with pytest.raises(CorruptRecordError, match="magic"):
        rb.parse_header(buf)


def legacy_message(magic: int) -> bytes:
    """A MessageSet entry, magic 0 or 1: offset, size, crc, magic, attributes, [ts], key, value."""
    body = bytes([magic, 0]) + (struct.pack(">q", 1_000) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", 0) + body  # the CRC value does not matter for the rejection
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
def test_magic_0_and_1_are_unsupported(magic: int) -> None:
    buf = legacy_message(magic)
    assert buf[16] == magic  # magic sits at byte 16 in every format
    for parse in (rb.parse_header, rb.parse_and_verify):
        with pytest.raises(UnsupportedForMessageFormatError, match=f"v{magic}") as exc:
            parse(buf)
        assert exc.value.error_code == 43
    with pytest.raises(UnsupportedForMessageFormatError):
        list(rb.iter_headers(buf))


def test_iter_headers_walks_a_record_set() -> None:
    a, b, c = raw_batch(), raw_batch(body=b"z" * 20, base_offset=1), raw_batch(base_offset=2)
    got = list(rb.iter_headers(bytes(a + b + c)))
    assert [pos for pos, _ in got] == [0, len(a), len(a) + len(b)]
    assert [h.base_offset for _, h in got] == [0, 1, 2]
    assert list(rb.iter_headers(b"")) == []


def test_iter_headers_rejects_a_partial_trailing_batch() -> None:
    buf = raw_batch() + raw_batch()[:30]
    it = rb.iter_headers(bytes(buf))
    assert next(it)[0] == 0
    with pytest.raises(CorruptRecordError):
        next(it)


def test_iter_headers_crc_check_is_optional() -> None:
    buf = raw_batch()
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(rb.iter_headers(buf))
    assert len(list(rb.iter_headers(buf, verify_crc=False))) == 1


def test_set_base_offset_and_epoch_keep_the_crc() -> None:
    buf = raw_batch()
    crc_before = bytes(buf[17:21])
    rb.set_base_offset(buf, 0, 1_000_000)
    rb.set_partition_leader_epoch(buf, 0, 9)
    h = rb.parse_and_verify(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (1_000_000, 9)
    assert bytes(buf[17:21]) == crc_before


def test_rewrites_at_a_position_inside_a_record_set() -> None:
    first, second = raw_batch(), raw_batch(body=b"q" * 9)
    buf = first + second
    view = memoryview(buf)
    rb.set_base_offset(view, len(first), 77)
    rb.set_partition_leader_epoch(view, len(first), 4)
    rb.set_log_append_time(view, len(first), 5_555)
    assert rb.parse_and_verify(buf) == rb.parse_and_verify(first)  # untouched
    h = rb.parse_and_verify(buf, len(first))
    assert (h.base_offset, h.partition_leader_epoch, h.max_timestamp) == (77, 4, 5_555)


def test_set_log_append_time() -> None:
    buf = raw_batch(attributes=0x12, base_timestamp=10, max_timestamp=20)
    rb.set_log_append_time(buf, 0, 123_456)
    h = rb.parse_and_verify(buf)  # CRC recomputed
    assert h.timestamp_type == 1 and h.max_timestamp == 123_456
    assert h.attributes == 0x12 | rb.TIMESTAMP_TYPE_MASK
    assert h.base_timestamp == 10 and h.compression == 2 and h.is_transactional


def test_build_batch_output_matches_the_header_layout() -> None:
    buf = build_batch(
        [RecordSpec(b"k", b"v", timestamp=5), RecordSpec(None, b"w", timestamp=9)],
        base_offset=3, producer_id=8, producer_epoch=1, base_sequence=4,
        partition_leader_epoch=2, is_transactional=True,
    )  # fmt: skip
    h = rb.parse_and_verify(buf)
    assert (h.base_offset, h.last_offset_delta, h.records_count, h.size) == (3, 1, 2, len(buf))
    assert (h.base_timestamp, h.max_timestamp) == (5, 9)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (8, 1, 4)
    assert h.partition_leader_epoch == 2 and h.is_transactional
    assert h.crc == crc32c.crc32c(buf[21:])
