"""strata.spark.record_columns: Fetch bytes -> Arrow columns, against storage's own decoder."""

from __future__ import annotations

import datetime
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.client.fetch_codec import AbortedTransaction
from strata.spark.record_columns import _varint, decode
from strata.storage import record_batch as rb
from strata.storage.errors import CorruptRecordError
from strata.storage.records import (
    ControlRecordType,
    RecordSpec,
    build_batch,
    control_record_key,
    encode_varlong,
    end_transaction_marker_value,
    iter_records,
)

T0 = 1_700_000_000_000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

payloads = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=5), payloads), max_size=3).map(tuple)
specs = st.builds(RecordSpec, key=payloads, value=payloads, headers=headers,
                  timestamp=st.integers(T0 - 10_000, T0 + 10_000))


def rows(records: bytes, start: int, until: int, **kwargs: object) -> list[dict[str, object]]:
    decoded = decode(records, "t", 3, start, until, include_headers=True, **kwargs)  # type: ignore[arg-type]
    return [] if decoded.batch is None else decoded.batch.to_pylist()


def expected(records: bytes, start: int, until: int, log_append: bool = False
             ) -> list[dict[str, object]]:
    result = []
    pos = 0
    while pos < len(records):
        header = rb.parse_header(records, pos)
        for r in iter_records(records, pos):
            if start <= r.offset < until:
                ts = header.max_timestamp if log_append else r.timestamp
                result.append({
                    "key": r.key, "value": r.value, "topic": "t", "partition": 3,
                    "offset": r.offset,
                    "timestamp": EPOCH + datetime.timedelta(milliseconds=ts),
                    "timestampType": int(log_append),
                    "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
                })
        pos += header.size
    return result


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(specs, min_size=1, max_size=6), st.sampled_from(range(5))),
                min_size=1, max_size=4),
       st.data())
def test_every_column_equals_storage_decoder(batches: list[tuple[list[RecordSpec], int]],
                                             data: st.DataObject) -> None:
    chunks, base = [], 5
    for specs_, codec in batches:
        chunks.append(build_batch(specs_, base_offset=base, compression=codec))
        base += len(specs_)
    records = b"".join(chunks)
    start = data.draw(st.integers(5, base))
    until = data.draw(st.integers(start, base + 1))
    assert rows(records, start, until) == expected(records, start, until)
    assert decode(records, "t", 3, start, until).next_offset == max(base, start)


def test_log_append_time_reads_the_batch_max_timestamp() -> None:
    records = build_batch([RecordSpec(value=b"a", timestamp=T0), RecordSpec(value=b"b")],
                          timestamp_type=1)
    got = rows(records, 0, 9)
    assert got == expected(records, 0, 9, log_append=True)
    assert {r["timestampType"] for r in got} == {1}


def test_a_cut_short_last_batch_waits_for_the_next_fetch() -> None:
    first = build_batch([RecordSpec(value=b"a")], base_offset=0)
    second = build_batch([RecordSpec(value=b"b"), RecordSpec(value=b"c")], base_offset=1)
    decoded = decode(first + second[:-3], "t", 3, 0, 10)
    assert decoded.batch is not None and decoded.batch.column("value").to_pylist() == [b"a"]
    assert decoded.next_offset == 1


def test_records_before_the_fetch_offset_are_dropped() -> None:
    records = build_batch([RecordSpec(value=b"%d" % i) for i in range(5)], base_offset=10)
    decoded = decode(records, "t", 3, 12, 14)
    assert decoded.batch is not None and decoded.batch.column("offset").to_pylist() == [12, 13]
    assert decoded.next_offset == 15


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_batch([RecordSpec(key=control_record_key(kind),
                                   value=end_transaction_marker_value(0))],
                       base_offset=offset, producer_id=producer_id, producer_epoch=0,
                       is_transactional=True, is_control=True)


def transactional(offset: int, producer_id: int, value: bytes) -> bytes:
    return build_batch([RecordSpec(value=value)], base_offset=offset, producer_id=producer_id,
                       producer_epoch=0, base_sequence=0, is_transactional=True)


def test_read_committed_drops_aborted_transactions_and_every_marker() -> None:
    records = b"".join([
        transactional(0, 7, b"aborted"), transactional(1, 8, b"committed"),
        marker(2, 7, ControlRecordType.ABORT), marker(3, 8, ControlRecordType.COMMIT),
        transactional(4, 7, b"later"), marker(5, 7, ControlRecordType.COMMIT),
    ])
    committed = decode(records, "t", 3, 0, 10, aborted=[AbortedTransaction(7, 0)])
    assert committed.batch is not None
    assert committed.batch.column("value").to_pylist() == [b"committed", b"later"]
    assert committed.next_offset == 6
    uncommitted = decode(records, "t", 3, 0, 10)
    assert uncommitted.batch is not None
    assert uncommitted.batch.column("value").to_pylist() == [b"aborted", b"committed", b"later"]


def test_only_markers_give_no_batch_but_move_the_position() -> None:
    decoded = decode(marker(4, 7, ControlRecordType.COMMIT), "t", 3, 4, 10)
    assert (decoded.batch, decoded.next_offset) == (None, 5)


def test_a_bad_crc_is_corruption_naming_the_batch() -> None:
    records = bytearray(build_batch([RecordSpec(value=b"abc")], base_offset=42))
    records[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="offset 42 fails its CRC"):
        decode(bytes(records), "t", 3, 0, 100)


def test_a_record_longer_than_its_batch_is_corruption() -> None:
    records = bytearray(build_batch([RecordSpec(value=b"abc")], base_offset=42))
    records[rb.HEADER_SIZE] = 0x7E  # record length 63: past the end of the batch
    struct.pack_into(">I", records, rb.CRC_OFFSET, rb.compute_crc(records, 0, len(records)))
    with pytest.raises(CorruptRecordError, match="batch at offset 42 does not parse"):
        decode(bytes(records), "t", 3, 0, 100)


def test_headers_running_past_their_record_are_corruption_not_the_next_record() -> None:
    records = bytearray(build_batch([RecordSpec(value=b"a", headers=(("h", b"xy"),)),
                                     RecordSpec(value=b"b")], base_offset=7))
    at = records.index(b"\x02h\x04xy") + 2  # the header value's length, 2 (zigzag 4)
    records[at] = 0x14  # 10 bytes: past this record's end, though not past the fetch's
    struct.pack_into(">I", records, rb.CRC_OFFSET, rb.compute_crc(records, 0, len(records)))
    with pytest.raises(CorruptRecordError, match="headers of record 0"):
        decode(bytes(records), "t", 3, 0, 100, include_headers=True)


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -(2**31), 2**62, -(2**62) - 1,
                                   2**63 - 1, -(2**63)])
def test_varints_decode_over_the_whole_64_bit_range(value: int) -> None:
    encoded = encode_varlong(value)
    assert _varint(np.frombuffer(encoded, np.uint8), 0, len(encoded)) == (value, len(encoded))
