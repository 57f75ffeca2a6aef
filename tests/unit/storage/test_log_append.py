"""Pure offset assignment: the bytes a leader writes equal the client's batch with only
baseOffset and partitionLeaderEpoch rewritten (and, under LogAppendTime, the timestamp)."""

from __future__ import annotations

from strata.storage import record_batch as rb
from strata.storage.log_append import assign_offsets
from strata.storage.records import RecordSpec, build_batch, iter_records


def joined(data: bytearray | list[bytes | memoryview]) -> bytes:
    return bytes(data) if isinstance(data, bytearray) else b"".join(bytes(c) for c in data)


def two_batches() -> tuple[bytes, list[tuple[int, rb.BatchHeader]]]:
    a = build_batch([RecordSpec(value=b"a", timestamp=5), RecordSpec(value=b"b", timestamp=9)])
    b = build_batch([RecordSpec(value=b"c", timestamp=7)], producer_id=3, producer_epoch=0,
                    base_sequence=0)
    records = a + b
    return records, list(rb.iter_headers(records))


def test_offsets_and_epoch_without_copying_the_batches() -> None:
    records, batches = two_batches()
    out = assign_offsets(records, batches, 100, 7, None)
    assert isinstance(out.data, list) and out.size == len(records)
    data = joined(out.data)
    headers = [h for _, h in rb.iter_headers(data)]  # CRCs still valid
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(100, 7), (102, 7)]
    for pos, h in batches:  # everything after each batch's first 16 bytes is the client's
        assert data[pos + 16 : pos + h.size] == records[pos + 16 : pos + h.size]
    assert [r.offset for p, _ in rb.iter_headers(data) for r in iter_records(data, p)] == \
        [100, 101, 102]
    assert (out.last_offset, out.max_timestamp, out.offset_of_max_timestamp) == (102, 9, 101)
    assert [(h.producer_id, f, last) for h, f, last in out.producer_batches] == [(3, 102, 102)]
    assert records == two_batches()[0]  # the client's buffer is untouched


def test_log_append_time_rewrites_timestamps_and_crc() -> None:
    records, batches = two_batches()
    out = assign_offsets(records, batches, 0, 1, 12345)
    assert isinstance(out.data, bytearray)
    headers = [h for _, h in rb.iter_headers(bytes(out.data))]  # CRC recomputed
    assert all(h.timestamp_type == 1 and h.max_timestamp == 12345 for h in headers)
    assert out.max_timestamp == 12345 and out.offset_of_max_timestamp == 1
