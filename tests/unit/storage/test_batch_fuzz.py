"""Fuzzing the batch readers: any input gives a batch or a StorageError, never another exception;
and every flipped byte or truncation of a valid batch that matters is caught.

Three kinds of input: arbitrary bytes (stopped mostly by the header), a well-formed v2 header in
front of arbitrary bytes with a correct CRC (reaches record parsing and every decompressor), and
mutations of valid batches.
"""

import contextlib
import struct
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.storage import record_batch as rb
from strata.storage.errors import StorageError
from strata.storage.log_validator import ValidationConfig, validate_records
from strata.storage.records import RecordSpec, build_batch, iter_records

NOW = 1_700_000_000_000
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEEP = ValidationConfig(deep=True, compacted=True, message_timestamp_after_max_ms=2**62)


def _consume(buf: bytes) -> None:
    """Every reader over ``buf``; each must finish or raise a StorageError."""
    readers: list[Callable[[], object]] = [
        lambda: rb.parse_and_verify(buf),
        lambda: list(rb.iter_headers(buf)),
        lambda: list(rb.iter_headers(buf, verify_crc=False)),
        lambda: list(iter_records(buf)),
        lambda: list(iter_records(buf, verify_crc=False)),
        lambda: validate_records(buf, ValidationConfig(), NOW),
        lambda: validate_records(buf, DEEP, NOW),
    ]
    for read in readers:
        with contextlib.suppress(StorageError):
            read()


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data: bytes) -> None:
    _consume(data)


@st.composite
def signed_garbage_batches(draw: st.DrawFn) -> bytes:
    """A valid header (CRC included) over arbitrary bytes in the records section."""
    # Half the time real records (cut short) so that parsing gets deep before it breaks.
    cut = st.integers(0, 300)
    real = st.builds(lambda b, n: b[rb.HEADER_SIZE :][:n], st.sampled_from(_VALID), cut)
    body = draw(st.one_of(st.binary(max_size=300), real))
    codec = draw(st.integers(0, 7))
    attributes = codec | draw(st.sampled_from([0, 0x08, 0x10, 0x20, 0x40]))
    count = draw(st.integers(-1, 40))
    buf = bytearray(rb.HEADER_SIZE) + body
    struct.pack_into(
        ">qiibIhiqqqhii", buf, 0, 0, len(buf) - 12, -1, 2, 0, attributes,
        max(count - 1, 0), NOW, NOW + draw(st.integers(-5, 5)), -1, -1, -1, count,
    )  # fmt: skip
    struct.pack_into(">I", buf, rb.CRC_OFFSET, rb.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


_SPECS = [
    RecordSpec(b"key", b"value" * 20, (("h", b"v"), ("n", None)), NOW),
    RecordSpec(None, None, (), NOW + 1),
    RecordSpec(b"k2", b"", (("x", b""),), NOW - 3),
]
_VALID = [build_batch(_SPECS, compression=c) for c in range(5)]


@FUZZ
@given(signed_garbage_batches())
def test_signed_garbage(buf: bytes) -> None:
    _consume(buf)


@FUZZ
@given(st.sampled_from(_VALID), st.data())
def test_flipped_byte_is_caught(batch: bytes, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(batch) - 1))
    mask = data.draw(st.integers(1, 255))
    buf = bytearray(batch)
    buf[index] ^= mask
    mutated = bytes(buf)
    outside_crc = index < 8 or 12 <= index < 16  # baseOffset, partitionLeaderEpoch
    if outside_crc:
        rb.parse_and_verify(mutated)
    else:
        with pytest.raises(StorageError):
            rb.parse_and_verify(mutated)
        with pytest.raises(StorageError):
            list(iter_records(mutated))
    if 12 <= index < 16:  # the leader rewrites the epoch anyway
        validate_records(mutated, ValidationConfig(), NOW)
    else:  # a client's baseOffset must be 0
        with pytest.raises(StorageError):
            validate_records(mutated, ValidationConfig(), NOW)
    _consume(mutated)


@FUZZ
@given(st.sampled_from(_VALID), st.data())
def test_truncation_is_caught(batch: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(batch) - 1))
    short = batch[:cut]
    with pytest.raises(StorageError):
        rb.parse_and_verify(short)
    with pytest.raises(StorageError):
        list(rb.iter_headers(short or b"\x00"))  # b"" is a valid, empty record set
    with pytest.raises(StorageError):
        list(iter_records(short, verify_crc=False))
    with pytest.raises(StorageError):
        validate_records(short, ValidationConfig(), NOW)
    # A whole batch followed by a truncated one: the first is fine, the set is not.
    with pytest.raises(StorageError):
        validate_records(batch + (short or batch[:1]), ValidationConfig(), NOW)


@FUZZ
@given(st.sampled_from(_VALID), st.data())
def test_resigned_record_mutations_never_escape(batch: bytes, data: st.DataObject) -> None:
    """A flipped byte in the records section behind a recomputed CRC: read or rejected cleanly."""
    index = data.draw(st.integers(rb.HEADER_SIZE, len(batch) - 1))
    buf = bytearray(batch)
    buf[index] ^= data.draw(st.integers(1, 255))
    struct.pack_into(">I", buf, rb.CRC_OFFSET, rb.compute_crc(buf, 0, len(buf)))
    _consume(bytes(buf))


def test_valid_batches_pass_every_reader() -> None:
    for batch in _VALID:
        assert len(list(iter_records(batch))) == 3
        deep = ValidationConfig(deep=True, message_timestamp_after_max_ms=2**62)
        assert validate_records(batch, deep, NOW).record_count == 3
