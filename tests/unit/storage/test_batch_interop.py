"""Interop with RecordBatch v2 encoders and decoders we did not write.

* kafka-python's ``kafka.record.default_records`` (builder and reader), every codec: its codecs
  are python-snappy (xerial framing), lz4 (frames, independent blocks), zstandard and gzip.
* kio's ``kio.records`` (uncompressed only: it has no codec support), whose reader also checks
  the CRC and the batch length; it keeps timestamps at whole seconds, so the tests use those.

Each direction checks every header field and every record field.
"""

import datetime
import io
import warnings

import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader as KioHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from strata.storage import record_batch as rb
from strata.storage.log_validator import ValidationConfig, validate_records
from strata.storage.records import Record, RecordSpec, build_batch, iter_records

with warnings.catch_warnings():  # kafka-python's package import uses deprecated importlib APIs
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000

# Repetitive enough that kafka-python keeps the compression (it falls back when it does not pay).
SPECS = [
    RecordSpec(b"user-%d" % (i % 3) if i % 4 else None,
               (b"payload %d " % i) * 40 if i != 5 else None,
               (("trace-id", b"t%d" % i), ("nullable", None)) if i % 2 else (),
               T0 + (i * 7) % 23)
    for i in range(12)
]  # fmt: skip


def kafka_python_batch(codec: int, *, producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1, transactional: bool = False) -> bytes:  # fmt: skip
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20,
    )  # fmt: skip
    for i, s in enumerate(SPECS):
        meta = builder.append(i, timestamp=s.timestamp, key=s.key, value=s.value,
                              headers=list(s.headers))  # fmt: skip
        assert meta is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_kafka_python_batches_parse_here(codec: int) -> None:
    buf = kafka_python_batch(codec, producer_id=77, producer_epoch=3, base_sequence=100)
    h = rb.parse_and_verify(buf)
    theirs = DefaultRecordBatch(buf)
    assert h.compression == codec == theirs.compression_type
    assert (h.base_offset, h.size, h.magic) == (theirs.base_offset, theirs.size_in_bytes, 2)
    assert (h.crc, h.attributes) == (theirs.crc, theirs.attributes)
    assert (h.last_offset_delta, h.records_count) == (len(SPECS) - 1, len(SPECS))
    assert (h.base_timestamp, h.max_timestamp) == (T0, max(s.timestamp for s in SPECS))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 100)
    assert h.timestamp_type == 0 and not h.is_control and not h.is_transactional
    expected = [Record(i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(SPECS)]
    assert list(iter_records(buf)) == expected
    result = validate_records(buf, ValidationConfig(deep=True), T0)
    assert result.record_count == len(SPECS)


def test_kafka_python_transactional_flag() -> None:
    buf = kafka_python_batch(0, producer_id=5, producer_epoch=0, base_sequence=0,
                             transactional=True)  # fmt: skip
    assert rb.parse_and_verify(buf).is_transactional


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_our_batches_parse_in_kafka_python(codec: int) -> None:
    buf = build_batch(SPECS, base_offset=1_000, compression=codec, producer_id=12,
                      producer_epoch=1, base_sequence=30, partition_leader_epoch=6,
                      is_transactional=True)  # fmt: skip
    theirs = DefaultRecordBatch(buf)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec and theirs.magic == 2
    assert (theirs.base_offset, theirs.leader_epoch, theirs.size_in_bytes) == (1_000, 6, len(buf))
    assert (theirs.last_offset_delta, theirs.records_count) == (len(SPECS) - 1, len(SPECS))
    assert (theirs.first_timestamp, theirs.max_timestamp) == (T0, max(s.timestamp for s in SPECS))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (12, 1, 30)
    assert theirs.is_transactional and not theirs.is_control_batch
    got = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert got == [(1_000 + i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(SPECS)]


def test_our_log_append_time_in_kafka_python() -> None:
    buf = bytearray(build_batch(SPECS, compression=3))
    rb.set_log_append_time(buf, 0, T0 + 999)
    theirs = DefaultRecordBatch(bytes(buf))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    assert {r.timestamp for r in theirs} == {T0 + 999}


# ------------------------------------------------------------------------------------------ kio
def _utc(ms: int) -> TZAwareMicros:
    dt = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return TZAwareMicros.parse(dt)


SECONDS_SPECS = [
    RecordSpec(b"a", b"1", (("h", b"x"),), T0),
    RecordSpec(None, b"2", (), T0 + 3_000),
    RecordSpec(b"c", None, (("n", None),), T0 + 1_000),
]


def test_kio_batches_parse_here() -> None:
    out = io.BytesIO()
    write_new_batch(out, NewRecordBatch(
        producer_id=i64(8), producer_epoch=i16(2), base_sequence=i32(11), attributes=i16(0),
        records=tuple(
            KioRecord(attributes=i8(0), timestamp=_utc(s.timestamp), offset=i64(i), key=s.key,
                      value=s.value,
                      headers=tuple(KioHeader(key=k.encode(), value=v) for k, v in s.headers))
            for i, s in enumerate(SECONDS_SPECS)
        ),
    ))  # fmt: skip
    buf = out.getvalue()
    h = rb.parse_and_verify(buf)
    assert (h.size, h.records_count, h.last_offset_delta) == (len(buf), 3, 2)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0 + 3_000)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (8, 2, 11)
    assert list(iter_records(buf)) == [
        Record(i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(SECONDS_SPECS)
    ]
    assert validate_records(buf, ValidationConfig(deep=True), T0).record_count == 3


def test_our_batches_parse_in_kio() -> None:
    buf = build_batch(SECONDS_SPECS, base_offset=40, producer_id=3, producer_epoch=0,
                      base_sequence=5, partition_leader_epoch=2)  # fmt: skip
    batch, size = read_batch(buf, 0)  # checks the CRC and the batch length itself
    assert size == len(buf)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.last_offset_delta) == (40, 2, 2)
    assert (batch.base_timestamp, batch.max_timestamp) == (T0, T0 + 3_000)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 0, 5)
    assert batch.crc == rb.parse_header(buf).crc
    got = [
        (r.offset, int(r.timestamp.timestamp() * 1000), r.key, r.value,
         tuple((h.key, h.value) for h in r.headers))
        for r in batch.records
    ]  # fmt: skip
    assert got == [
        (40 + i, s.timestamp, s.key, s.value, tuple((k.encode(), v) for k, v in s.headers))
        for i, s in enumerate(SECONDS_SPECS)
    ]
