"""Compaction of one log: the pure core (offset map, ``filter_batch``, retention rules,
transactions, grouping) on bytes, then whole rounds on a real ``Log`` with a manual clock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from strata.storage import record_batch as rb
from strata.storage.batch_filter import BatchFilter, delete_horizon_ms, filter_batch
from strata.storage.cleaner import (
    Cleaner,
    CleanerStats,
    LogCleaningAbortedError,
    group_segments_by_size,
)
from strata.storage.clock import ManualClock
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_segment import LogSegment
from strata.storage.offset_map import OffsetMap
from strata.storage.records import (
    ControlRecordType,
    Record,
    RecordSpec,
    build_batch,
    control_record_key,
    end_transaction_marker_value,
    iter_records,
)
from strata.storage.transaction_scan import (
    AbortedTxn,
    LastRecord,
    ProducerScan,
    TransactionTracker,
)

T0 = 1_700_000_000_000
DAY = 86_400_000


def spec(key: bytes | None, value: bytes | None, ts: int = T0) -> RecordSpec:
    return RecordSpec(key=key, value=value, timestamp=ts)


def marker(kind: ControlRecordType, *, base_offset: int, pid: int, epoch: int = 0,
           ts: int = T0) -> bytes:
    return build_batch(
        [RecordSpec(key=control_record_key(kind), value=end_transaction_marker_value(0),
                    timestamp=ts)],
        base_offset=base_offset, producer_id=pid, producer_epoch=epoch, is_control=True,
        is_transactional=True,
    )


def keys_values(batch: bytes | None) -> list[tuple[int, bytes | None, bytes | None]]:
    assert batch is not None
    return [(r.offset, r.key, r.value) for r in iter_records(batch)]


# ---------------------------------------------------------------------------- offset map
def test_offset_map_put_get_and_latest_offset() -> None:
    m = OffsetMap(1 << 20)
    assert m.get(b"a") == -1
    assert m.put(b"a", 3) and m.put(b"b", 4) and m.put(b"a", 7)
    assert (m.get(b"a"), m.get(b"b"), m.size) == (7, 4, 2)
    m.update_latest_offset(9)
    m.update_latest_offset(5)
    assert m.latest_offset == 9
    m.clear()
    assert (m.size, m.latest_offset, m.get(b"a")) == (0, -1, -1)


def test_offset_map_is_bounded_per_entry_whatever_the_key_size() -> None:
    m = OffsetMap(OffsetMap.ENTRY_BYTES * 3, load_factor=1.0)
    assert m.capacity == 3
    for i in range(3):
        assert m.put(bytes([i]) * 100_000, i)
    assert not m.put(b"new", 10)  # full: a new key is refused...
    assert m.put(bytes([0]) * 100_000, 11)  # ...an existing one still moves up
    assert m.get(bytes([0]) * 100_000) == 11 and m.utilization == 1.0
    with pytest.raises(ValueError):
        OffsetMap(10)


# --------------------------------------------------------------------------- filter_batch
def test_filter_batch_keeping_everything_returns_the_original_bytes() -> None:
    batch = build_batch([spec(b"a", b"1"), spec(b"b", b"2")], base_offset=10, compression=1)
    assert filter_batch(batch, lambda r: True) == batch


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
def test_filter_batch_keeps_offsets_producer_fields_and_codec(codec: int) -> None:
    batch = build_batch(
        [spec(b"a", b"1", T0), spec(b"b", b"2", T0 + 5), spec(b"c", b"3", T0 + 2)],
        base_offset=100, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40,
        partition_leader_epoch=9,
    )
    out = filter_batch(batch, lambda r: r.key != b"b")
    assert out is not None
    header = rb.parse_and_verify(out)
    original = rb.parse_header(batch)
    assert keys_values(out) == [(100, b"a", b"1"), (102, b"c", b"3")]
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (100, 2, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert header.partition_leader_epoch == 9 and header.compression == codec
    assert header.last_sequence == original.last_sequence
    assert header.max_timestamp == T0 + 2  # follows the survivors
    assert [r.timestamp for r in iter_records(out)] == [T0, T0 + 2]


def test_filter_batch_dropping_everything() -> None:
    batch = build_batch([spec(b"a", b"1", T0 + 3), spec(b"b", b"2")], base_offset=5,
                        compression=4, producer_id=3, producer_epoch=1, base_sequence=0,
                        is_transactional=True, partition_leader_epoch=2)
    assert filter_batch(batch, lambda r: False) is None
    empty = filter_batch(batch, lambda r: False, retain_empty=True)
    assert empty is not None
    header = rb.parse_and_verify(empty)
    assert header.size == rb.HEADER_SIZE and header.records_count == 0
    assert (header.base_offset, header.last_offset, header.compression) == (5, 6, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (3, 1, 0)
    assert header.is_transactional and header.partition_leader_epoch == 2
    assert header.base_timestamp == header.max_timestamp == T0 + 3
    assert list(iter_records(empty)) == []


def test_filter_batch_stamps_a_delete_horizon_on_kept_tombstones() -> None:
    batch = build_batch([spec(b"a", None, T0), spec(b"b", b"2", T0 + 1)], base_offset=0)
    out = filter_batch(batch, lambda r: True, new_delete_horizon_ms=T0 + DAY)
    assert out is not None and out != batch
    header = rb.parse_and_verify(out)
    assert delete_horizon_ms(header) == T0 + DAY
    assert [(r.offset, r.timestamp, r.value) for r in iter_records(out)] == [
        (0, T0, None), (1, T0 + 1, b"2")]
    # No tombstone kept: nothing to stamp.
    dropped = filter_batch(batch, lambda r: r.value is not None, new_delete_horizon_ms=T0 + DAY)
    assert dropped is not None and delete_horizon_ms(rb.parse_header(dropped)) is None
    plain = build_batch([spec(b"b", b"2")])
    assert filter_batch(plain, lambda r: True, new_delete_horizon_ms=T0 + DAY) == plain
    # An existing horizon is kept when the batch is rebuilt.
    again = filter_batch(out, lambda r: r.key == b"a", new_delete_horizon_ms=T0 + 5 * DAY)
    assert again is not None and delete_horizon_ms(rb.parse_header(again)) == T0 + DAY


def test_filter_batch_keeps_log_append_time() -> None:
    batch = bytearray(build_batch([spec(b"a", b"1", T0), spec(b"b", b"2", T0)]))
    rb.set_log_append_time(batch, 0, T0 + 1000)
    out = filter_batch(bytes(batch), lambda r: r.key == b"b")
    assert out is not None
    header = rb.parse_and_verify(out)
    assert header.timestamp_type == 1 and header.max_timestamp == T0 + 1000
    assert [r.timestamp for r in iter_records(out)] == [T0 + 1000]


# ----------------------------------------------------------------------- retention rules
def mapped(pairs: Mapping[bytes, int], latest: int) -> OffsetMap:
    m = OffsetMap(1 << 20)
    for key, offset in pairs.items():
        m.put(key, offset)
    m.update_latest_offset(latest)
    return m


def test_batch_filter_keeps_the_latest_record_per_key() -> None:
    f = BatchFilter(mapped({b"a": 3, b"b": 1}, latest=3), now_ms=T0, delete_retention_ms=DAY)
    first = build_batch([spec(b"a", b"1"), spec(b"b", b"2"), spec(None, b"x")], base_offset=0)
    second = build_batch([spec(b"c", b"3"), spec(b"a", b"4"), spec(b"a", b"5")], base_offset=2)
    assert keys_values(f.filter(first)) == [(1, b"b", b"2")]
    # Offset 4 lies past the map: kept, whatever its key.
    assert keys_values(f.filter(second)) == [(2, b"c", b"3"), (3, b"a", b"4"), (4, b"a", b"5")]
    assert f.stats.invalid_messages_read == 1
    assert (f.stats.messages_read, f.stats.messages_written, f.stats.records_removed) == (6, 4, 2)


def test_tombstones_survive_until_their_delete_horizon() -> None:
    batch = build_batch([spec(b"a", None), spec(b"b", b"1")], base_offset=0)
    m = mapped({b"a": 0, b"b": 1}, latest=1)
    first = BatchFilter(m, now_ms=T0, delete_retention_ms=DAY).filter(batch)
    assert first is not None and delete_horizon_ms(rb.parse_header(first)) == T0 + DAY
    assert keys_values(first) == [(0, b"a", None), (1, b"b", b"1")]
    # Before the horizon: kept unchanged (horizon not moved).
    second = BatchFilter(m, now_ms=T0 + DAY - 1, delete_retention_ms=DAY).filter(first)
    assert second == first
    # At the horizon: the tombstone goes, the batch keeps its offsets.
    third = BatchFilter(m, now_ms=T0 + DAY, delete_retention_ms=DAY).filter(first)
    assert keys_values(third) == [(1, b"b", b"1")]
    assert rb.parse_header(third or b"").last_offset == 1


def test_a_superseded_tombstone_goes_at_once() -> None:
    batch = build_batch([spec(b"a", None), spec(b"a", b"back")], base_offset=0)
    out = BatchFilter(mapped({b"a": 1}, latest=1), now_ms=T0, delete_retention_ms=DAY).filter(
        batch)
    assert keys_values(out) == [(1, b"a", b"back")]
    assert delete_horizon_ms(rb.parse_header(out or b"")) is None


def test_last_batch_of_a_producer_stays_as_an_empty_batch() -> None:
    m = mapped({b"a": 9}, latest=9)
    old = build_batch([spec(b"a", b"1")], base_offset=0, producer_id=5, producer_epoch=0,
                      base_sequence=0)
    last = build_batch([spec(b"a", b"2")], base_offset=1, producer_id=5, producer_epoch=0,
                       base_sequence=1)
    f = BatchFilter(m, now_ms=T0, delete_retention_ms=DAY,
                    last_records={5: LastRecord(1, 0)})
    assert f.filter(old) is None
    kept = f.filter(last)
    assert kept is not None
    header = rb.parse_header(kept)
    assert (header.records_count, header.base_offset, header.base_sequence) == (0, 1, 1)


def test_batch_ending_the_cleanable_range_stays() -> None:
    m = mapped({b"a": 9}, latest=9)
    batch = build_batch([spec(b"a", b"1"), spec(b"a", b"2")], base_offset=3)
    assert BatchFilter(m, now_ms=T0, delete_retention_ms=DAY).filter(batch) is None
    kept = BatchFilter(m, now_ms=T0, delete_retention_ms=DAY, upper_bound_offset=5).filter(batch)
    assert kept is not None and rb.parse_header(kept).next_offset == 5


# --------------------------------------------------------------------------- transactions
def txn_batch(base: int, pid: int, *pairs: tuple[bytes, bytes], epoch: int = 0) -> bytes:
    return build_batch([spec(k, v) for k, v in pairs], base_offset=base, producer_id=pid,
                       producer_epoch=epoch, base_sequence=base, is_transactional=True)


def headers(*batches: bytes) -> Iterator[tuple[rb.BatchHeader, int | None]]:
    for b in batches:
        h = rb.parse_header(b)
        kind = next(iter_records(b)).key if h.is_control else None
        yield h, (None if kind is None else int.from_bytes(kind[2:4], "big"))


def test_producer_scan_finds_aborted_open_and_last_batches() -> None:
    scan = ProducerScan()
    log = [
        txn_batch(0, 1, (b"a", b"1")),
        txn_batch(1, 2, (b"b", b"1")),
        marker(ControlRecordType.ABORT, base_offset=2, pid=1),
        marker(ControlRecordType.COMMIT, base_offset=3, pid=2),
        txn_batch(4, 1, (b"c", b"1")),
        build_batch([spec(b"d", b"1")], base_offset=5, producer_id=3, producer_epoch=4,
                    base_sequence=0),
        marker(ControlRecordType.ABORT, base_offset=6, pid=3, epoch=5),
    ]
    for h, kind in headers(*log):
        scan.on_batch(h, kind)
    assert scan.aborted == [AbortedTxn(1, 0, 2)]
    assert scan.first_unstable_offset == 4
    assert scan.last_records[1] == LastRecord(4, 0)
    assert scan.last_records[2] == LastRecord(1, 0)
    assert scan.last_records[3] == LastRecord(None, 5)  # a marker of a newer epoch


def test_transaction_tracker_drops_aborted_data_and_releases_markers() -> None:
    tracker = TransactionTracker([AbortedTxn(1, 0, 2)])
    (d1, _), (d2, _), (abort, a_kind), (commit, c_kind) = headers(
        txn_batch(0, 1, (b"a", b"1")), txn_batch(1, 2, (b"b", b"1")),
        marker(ControlRecordType.ABORT, base_offset=2, pid=1),
        marker(ControlRecordType.COMMIT, base_offset=3, pid=2))
    assert tracker.on_batch_read(d1) is True
    assert tracker.on_batch_read(d2) is False
    assert tracker.on_control_batch_read(abort, a_kind) is False  # its data was still there
    assert tracker.on_control_batch_read(commit, c_kind) is False
    later = TransactionTracker([AbortedTxn(1, 0, 2)])  # a round where the data is gone
    assert later.on_control_batch_read(abort, a_kind) is True
    assert later.on_control_batch_read(commit, c_kind) is True
    assert later.on_control_batch_read(commit, None) is True  # an emptied marker batch


def test_batch_filter_removes_aborted_transactions_then_their_markers() -> None:
    batches = [
        txn_batch(0, 1, (b"a", b"aborted")),
        marker(ControlRecordType.ABORT, base_offset=1, pid=1),
        build_batch([spec(b"z", b"1")], base_offset=2),
    ]
    aborted = [AbortedTxn(1, 0, 1)]
    m = mapped({b"z": 2}, latest=2)

    def round_(now: int, log: list[bytes]) -> list[bytes]:
        f = BatchFilter(m, now_ms=now, delete_retention_ms=DAY, aborted=aborted)
        return [out for b in log if (out := f.filter(b)) is not None]

    first = round_(T0, batches)
    assert [rb.parse_header(b).base_offset for b in first] == [1, 2]
    assert delete_horizon_ms(rb.parse_header(first[0])) is None  # data was present
    second = round_(T0, first)
    assert delete_horizon_ms(rb.parse_header(second[0])) == T0 + DAY
    assert [rb.parse_header(b).base_offset for b in round_(T0 + DAY - 1, second)] == [1, 2]
    assert [rb.parse_header(b).base_offset for b in round_(T0 + DAY, second)] == [2]


# ------------------------------------------------------------------------------- grouping
@dataclass
class FakeIndex:
    size_in_bytes: int


@dataclass
class FakeSegment:
    base_offset: int
    size: int
    index_bytes: int = 8
    time_index_bytes: int = 12

    @property
    def offset_index(self) -> FakeIndex:
        return FakeIndex(self.index_bytes)

    @property
    def time_index(self) -> FakeIndex:
        return FakeIndex(self.time_index_bytes)


def grouped(segments: Sequence[FakeSegment], max_size: int, max_index: int,
            uncleanable: int) -> list[list[int]]:
    groups = group_segments_by_size(segments, max_size, max_index, uncleanable)  # type: ignore[arg-type]
    return [[s.base_offset for s in g] for g in groups]


def test_group_segments_by_log_size_and_index_size() -> None:
    segs = [FakeSegment(0, 400), FakeSegment(10, 400), FakeSegment(20, 300),
            FakeSegment(30, 900), FakeSegment(40, 0)]
    assert grouped(segs, 1000, 1000, 50) == [[0, 10], [20], [30, 40]]
    assert grouped(segs, 10_000, 24, 50) == [[0, 10], [20, 30], [40]]  # 2 time indexes fit
    assert grouped(segs, 10_000, 10_000, 50) == [[0, 10, 20, 30, 40]]


def test_group_segments_keeps_relative_offsets_in_32_bits() -> None:
    big = 1 << 31
    segs = [FakeSegment(0, 10), FakeSegment(big - 10, 10), FakeSegment(big + 5, 10)]
    assert grouped(segs, 10_000, 10_000, big + 100) == [[0], [big - 10, big + 5]]
    # An empty segment does not count against the offset range.
    segs = [FakeSegment(0, 10), FakeSegment(big - 10, 0), FakeSegment(big + 50, 10)]
    assert grouped(segs, 10_000, 10_000, big + 100) == [[0, big - 10], [big + 50]]


# ------------------------------------------------------------------- rounds on a real log
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1200", "index.interval.bytes": "100",
           "segment.index.bytes": "4096"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def open_log(path: Path, clock: ManualClock, overrides: Mapping[str, str] | None = None,
             **kw: int | bool) -> Log:
    config = LogConfig.from_props({**COMPACT, **(overrides or {})})
    return load_log(path, config, clock, **kw)  # type: ignore[arg-type]


def read_all(log: Log) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        pos, got = 0, list[Record]()
        while (size := rb.peek_size(data, pos)) is not None and pos + size <= len(data):
            got.extend(r for r in iter_records(data, pos) if r.offset >= offset)
            pos += size
        if not got:
            headers_ = list(rb.iter_headers(data[:pos])) if pos else []
            if not headers_:
                break
            offset = headers_[-1][1].next_offset
            continue
        out.extend(got)
        offset = got[-1].offset + 1
    return out


def fill(log: Log, clock: ManualClock, n: int, keys: int, start: int = 0) -> dict[bytes, Record]:
    """Append n single-record batches over ``keys`` keys; returns the latest record per key."""
    latest: dict[bytes, Record] = {}
    for i in range(start, start + n):
        key = b"key-%d" % (i % keys)
        value = b"value-%d" % i
        info = log.append_as_leader(build_batch([spec(key, value, clock.milliseconds())]), 0)
        latest[key] = Record(info.first_offset, clock.milliseconds(), key, value)
        clock.advance(1)
    log.update_high_watermark(log.log_end_offset)
    return latest


def clean(log: Log, clock: ManualClock, first_dirty: int = 0, memory: int = 1 << 20,
          **kw: Any) -> CleanerStats:
    """One round over ``log`` up to its active segment, as the LogCleaner would run it."""
    cleaner = Cleaner(OffsetMap(memory), clock=clock)
    return cleaner.clean(log, first_dirty, log.active_segment.base_offset, clock.milliseconds(),
                         **kw)


def as_tuples(records: Sequence[Record]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records]


def test_compaction_keeps_the_latest_record_per_key_at_its_offset(
        tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    latest = fill(log, clock, 300, keys=7)
    active_base = log.active_segment.base_offset
    before = len(log.segments)
    stats = clean(log, clock)
    assert stats.end_offset == active_base
    assert stats.records_removed > 250 and stats.segments_replaced == before - 1
    records = read_all(log)
    cleaned = [r for r in records if r.offset < active_base]
    tail = [r for r in records if r.offset >= active_base]
    # The latest per key of the cleanable range (the active segment is not looked at).
    latest_below = {b"key-%d" % (o % 7): o for o in range(active_base)}
    assert [r.offset for r in cleaned] == sorted(latest_below.values())
    assert all(r.value == b"value-%d" % r.offset for r in cleaned)
    assert set(latest.values()) <= set(records)
    assert tail and all(r.value == b"value-%d" % r.offset for r in tail)
    assert log.log_end_offset == 300 and len(log.segments) == before
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    # Appends continue; a restart sees the same log.
    fill(log, clock, 5, keys=7, start=300)
    snapshot = as_tuples(read_all(log))
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert as_tuples(read_all(reopened)) == snapshot
    reopened.close()


def test_second_round_merges_small_cleaned_segments(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 200, keys=5)
    clean(log, clock)
    n_after_first = len(log.segments)
    latest = fill(log, clock, 100, keys=5, start=200)
    first_dirty = 200
    log.roll()
    cleaner = Cleaner(OffsetMap(1 << 20), clock=clock)
    cleaner.clean(log, first_dirty, log.active_segment.base_offset, clock.milliseconds())
    assert len(log.segments) < n_after_first
    records = read_all(log)
    assert as_tuples(records) == as_tuples(sorted(latest.values(), key=lambda r: r.offset))


def test_tombstones_are_removed_after_delete_retention(tmp_path: Path,
                                                       clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"delete.retention.ms": str(DAY)})
    fill(log, clock, 40, keys=4)
    for k in (b"key-1", b"key-2"):
        log.append_as_leader(build_batch([spec(k, None, clock.milliseconds())]), 0)

    def dirty_round(first_dirty: int | None = None) -> None:
        """Fresh data for key-0 only, rolled, then a round over the dirty section."""
        first_dirty = log.log_end_offset if first_dirty is None else first_dirty
        fill(log, clock, 20, keys=1, start=1000)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        clean(log, clock, first_dirty=first_dirty)

    dirty_round(first_dirty=0)
    values = {r.key: r.value for r in read_all(log)}
    assert values[b"key-1"] is None and values[b"key-2"] is None  # kept, horizon stamped
    horizons = {delete_horizon_ms(h) for seg in log.segments for _, h in seg.batches()}
    assert clock.milliseconds() + DAY in horizons
    clock.advance(DAY - 100)
    dirty_round()
    assert {r.key for r in read_all(log)} >= {b"key-1", b"key-2"}
    clock.advance(100)
    dirty_round()
    assert {r.key: r.value for r in read_all(log)} == {b"key-0": b"value-1019",
                                                       b"key-3": b"value-39"}


def test_a_small_offset_map_cleans_part_of_the_dirty_section(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 300, keys=300)  # every key distinct
    all_records = as_tuples(read_all(log))
    cleaner = Cleaner(OffsetMap(OffsetMap.ENTRY_BYTES * 100, load_factor=1.0), clock=clock)
    upper = log.active_segment.base_offset
    stats = cleaner.clean(log, 0, upper, clock.milliseconds())
    assert stats.end_offset == 100  # the map filled up after 100 keys
    assert as_tuples(read_all(log)) == all_records  # distinct keys: nothing to remove
    stats = cleaner.clean(log, stats.end_offset, upper, clock.milliseconds())
    assert stats.end_offset == 200


def test_an_offset_map_smaller_than_one_batch_is_an_error(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(build_batch([spec(b"x%d" % i, b"v") for i in range(10)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = Cleaner(OffsetMap(OffsetMap.ENTRY_BYTES * 5, load_factor=1.0))
    with pytest.raises(ValueError, match="fewer than one batch"):
        cleaner.clean(log, 0, log.active_segment.base_offset, clock.milliseconds())


def test_idempotent_producers_keep_their_last_batch(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for seq in range(20):
        log.append_as_leader(build_batch([spec(b"k", b"v%d" % seq, clock.milliseconds())],
                                         producer_id=42, producer_epoch=0, base_sequence=seq), 0)
    fill(log, clock, 40, keys=1)  # key-0 overwrites nothing of the producer's key "k"...
    for _ in range(3):
        log.append_as_leader(build_batch([spec(b"k", b"plain", clock.milliseconds())]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock)
    data = log.read(0, 1 << 20).read_bytes()
    producer_batches = [h for _, h in rb.iter_headers(data[: len(data)]) if h.producer_id == 42]
    assert len(producer_batches) == 1
    assert producer_batches[0].records_count == 0 and producer_batches[0].base_sequence == 19
    # The producer continues its sequence after a restart.
    log.close()
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(build_batch([spec(b"k", b"v20")], producer_id=42, producer_epoch=0,
                                     base_sequence=20), 0)
    log.close()


def test_aborted_transactions_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_follower(build_batch([spec(b"a", b"committed")], base_offset=0))
    log.append_as_follower(txn_batch(1, 9, (b"a", b"aborted"), (b"b", b"aborted")))
    log.append_as_follower(marker(ControlRecordType.ABORT, base_offset=3, pid=9))
    log.append_as_follower(build_batch([spec(b"c", b"1")], base_offset=4))
    log.roll()
    log.update_high_watermark(log.log_end_offset)

    def batches() -> list[tuple[int, int]]:
        return [(h.base_offset, h.records_count) for s in log.segments for _, h in s.batches()]

    clean(log, clock)
    # Producer 9 is active: its aborted batch stays as an empty batch (its last sequence), and
    # so does the marker of that transaction.
    assert batches() == [(0, 1), (1, 0), (3, 1), (4, 1)]
    # the cleaned segment keeps the .txnindex entry of the aborted transaction
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(9, 1)]
    assert log.segments[0].txn_index.path.exists()
    assert [(o, v) for o, _, v in as_tuples(read_all(log)) if o != 3] == [
        (0, b"committed"), (4, b"1")]
    log.producer_state.remove_expired_producers(clock.milliseconds() + DAY)
    clean(log, clock)  # the producer expired: its empty batch goes, the marker not yet
    assert batches() == [(0, 1), (3, 1), (4, 1)]
    clean(log, clock)  # the marker's transaction is empty: it gets a delete horizon
    assert batches() == [(0, 1), (3, 1), (4, 1)]
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(9, 1)]
    clock.advance(DAY)
    clean(log, clock)
    assert batches() == [(0, 1), (4, 1)]
    # the marker is gone, and so is its .txnindex entry
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


def test_open_transactions_bound_the_cleanable_range(tmp_path: Path,
                                                     clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200"})
    log.append_as_follower(build_batch([spec(b"a", b"1")], base_offset=0))
    log.roll()
    log.append_as_follower(txn_batch(1, 9, (b"a", b"open")))
    log.roll()
    log.append_as_follower(build_batch([spec(b"a", b"2")], base_offset=2))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    stats = clean(log, clock)
    assert stats.end_offset == 1
    assert [r.value for r in read_all(log)] == [b"1", b"open", b"2"]


def test_abort_deletes_the_cleaned_files(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 100, keys=3)
    before = as_tuples(read_all(log))
    calls = 0

    def check_done() -> None:
        nonlocal calls
        calls += 1
        if calls > 150:
            raise LogCleaningAbortedError("test")

    with pytest.raises(LogCleaningAbortedError):
        clean(log, clock, check_done=check_done)
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]
    assert len(as_tuples(read_all(log))) < len(before)  # groups swapped before the abort stay
    latest = {k: (o, v) for o, k, v in before}
    assert {k: (o, v) for o, k, v in as_tuples(read_all(log))} == latest


def test_swap_is_refused_when_retention_removed_the_segments(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 100, keys=3)
    first = log.segments[0]

    def racing_swap(new: Sequence[LogSegment], old: Sequence[LogSegment]) -> None:
        log.delete_records_before(log.segments[1].base_offset)  # retention got there first
        from strata.storage.cleaner import swap_if_current
        swap_if_current(log)(new, old)

    with pytest.raises(LogCleaningAbortedError):
        clean(log, clock, swap=racing_swap)
    assert first not in log.segments
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]


def test_replace_segments_leaves_old_files_to_the_logs_delayed_deletion(
        tmp_path: Path, clock: ManualClock) -> None:
    from strata.storage.log_roll import segment_config
    from strata.storage.segment_swap import replace_segments

    config = segment_config(LogConfig())
    old = []
    for base in (0, 2):
        seg = LogSegment.open(tmp_path, base, config, now_ms=T0)
        batch = build_batch([spec(b"a", b"%d" % base), spec(b"a", b"%d" % (base + 1))],
                            base_offset=base)
        seg.append(base + 1, T0, base + 1, batch)
        old.append(seg)
    new = LogSegment.open(tmp_path, 0, config, now_ms=T0, file_suffix=".cleaned")
    new.append(3, T0, 3, build_batch([spec(b"a", b"3")], base_offset=3))
    scheduled: list[LogSegment] = []

    def schedule_deletion(segments: Sequence[LogSegment]) -> None:
        for seg in segments:
            seg.change_file_suffixes("", ".deleted")
        scheduled.extend(segments)

    replace_segments(tmp_path, [new], old, schedule_deletion=schedule_deletion)
    assert scheduled == old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{0:020d}{s}" for s in (".log", ".index", ".timeindex")]
        + [f"{b:020d}{s}.deleted" for b in (0, 2) for s in (".log", ".index", ".timeindex")])
    assert keys_values(old[1].log.read(0, 1 << 20)) == [(2, b"a", b"2"), (3, b"a", b"3")]
    assert keys_values(new.log.read(0, 1 << 20)) == [(3, b"a", b"3")]
    for seg in (*old, new):
        seg.close()
