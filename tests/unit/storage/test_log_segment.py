"""LogSegment: append/read/translate, KIP-74, index spacing, recovery (truncated and flipped
bytes), index rebuilds, truncation, roll rules, offsets by timestamp, lifecycle."""

import errno
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.abstract_index import CorruptIndexError
from strata.storage.errors import KafkaStorageError
from strata.storage.log_segment import (
    LogSegment,
    LogSegmentOffsetOverflowError,
    RollParams,
    SegmentConfig,
)
from strata.storage.records import RecordSpec, build_batch

NOW = 1_700_000_000_000


def make_batch(
    base_offset: int,
    count: int = 1,
    ts: int = 1000,
    timestamps: Sequence[int] | None = None,
    value_size: int = 20,
) -> bytes:
    stamps = list(timestamps) if timestamps is not None else [ts + i for i in range(count)]
    return build_batch(
        [RecordSpec(key=b"key", value=b"v" * value_size, timestamp=t) for t in stamps],
        base_offset=base_offset,
        partition_leader_epoch=0,
    )


def append(seg: LogSegment, data: bytes) -> None:
    """Append like Log does: largest offset, max timestamp and the last offset of its batch."""
    headers = [h for _, h in rb.iter_headers(data)]
    max_ts, offset_of_max = -1, headers[0].last_offset
    for h in headers:
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, h.last_offset
    seg.append(headers[-1].last_offset, max_ts, offset_of_max, data)


def open_seg(d: Path, base: int = 0, interval: int = 4096, max_index: int = 10 * 1024 * 1024,
             exists: bool = False, suffix: str = "") -> LogSegment:
    config = SegmentConfig(index_interval_bytes=interval, max_index_size=max_index)
    return LogSegment.open(d, base, config, now_ms=NOW, file_already_exists=exists,
                           file_suffix=suffix)


def index_entries(seg: LogSegment) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    oi, ti = seg.offset_index, seg.time_index
    return ([oi.entry(i) for i in range(oi.entries)],
            [ti.entry(i) for i in range(ti.entries)])


def filled(d: Path, interval: int = 1, n: int = 8) -> tuple[LogSegment, list[bytes]]:
    """A segment at base 0 with ``n`` batches of 3 records each (offsets 3i..3i+2)."""
    seg = open_seg(d, interval=interval)
    batches = [make_batch(3 * i, count=3, ts=1000 * (i + 1)) for i in range(n)]
    for b in batches:
        append(seg, b)
    return seg, batches


# ------------------------------------------------------------------------ append / read
def test_append_read_and_translate(tmp_path: Path) -> None:
    seg = open_seg(tmp_path, base=100)
    b0, b3, b10 = make_batch(100, 3), make_batch(103, 2), make_batch(110, 1)  # gap 105-109
    for b in (b0, b3, b10):
        append(seg, b)
    data = b0 + b3 + b10
    assert seg.size == len(data)
    assert seg.read_next_offset() == 111
    assert [p for p, _ in seg.batches()] == [0, len(b0), len(b0) + len(b3)]
    whole = seg.read(100, 10**6)
    assert whole is not None and whole.read_bytes() == data
    for offset, position in [(101, 0), (103, len(b0)), (104, len(b0)),
                             (105, len(b0) + len(b3)), (109, len(b0) + len(b3))]:
        found = seg.translate_offset(offset)
        assert found is not None and found[0] == position
        fetched = seg.read(offset, 10**6)
        assert fetched is not None and fetched.read_bytes() == data[position:]
    assert seg.translate_offset(111) is None
    assert seg.read(111, 100) is None
    assert seg.translate_offset(100, starting_position=len(b0))[1].base_offset == 103  # type: ignore[index]
    seg.close()


def test_read_sizes_and_kip74_min_one_message(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    b0, b1 = make_batch(0, 3, value_size=100), make_batch(3, 1)
    append(seg, b0)
    append(seg, b1)

    def length(*args: object, **kw: object) -> int:
        s = seg.read(*args, **kw)  # type: ignore[arg-type]
        assert s is not None
        return s.length

    assert length(0, 10) == 0  # the first batch would be partial: nothing (Kafka's Fetch v3+)
    assert length(0, len(b0) + 5) == len(b0) + 5  # a partial batch after whole ones, like Kafka
    assert length(0, 10, min_one_message=True) == len(b0)  # KIP-74: the first batch whole
    assert length(0, 0) == 0
    assert length(0, 0, min_one_message=True) == len(b0)
    assert length(0, len(b0) + 5, min_one_message=True) == len(b0) + 5
    assert length(0, 10**6, max_position=len(b0)) == len(b0)
    assert length(0, 10**6, len(b0), True) == len(b0)
    assert length(3, 10**6, max_position=len(b0)) == 0  # max_position before the start
    assert length(0, 10**6) == len(b0) + len(b1)
    with pytest.raises(ValueError):
        seg.read(0, -1)
    seg.close()


def test_index_entries_follow_kafka_interval_rule(tmp_path: Path) -> None:
    interval = 150
    seg = open_seg(tmp_path, interval=interval)
    appends: list[bytes] = []
    offset = 0
    for i in range(40):
        count = 1 + i % 4
        data = make_batch(offset, count, ts=10_000 + 10 * i, value_size=5 + (i * 7) % 40)
        offset += count
        if i % 5 == 4:  # some appends carry two batches (a follower's fetch)
            data += make_batch(offset, 1, ts=10_000 + 10 * i + 5)
            offset += 1
        appends.append(data)
    expected_offsets, expected_times = [], []
    since, position, max_ts, max_ts_offset = 0, 0, -1, -1
    for data in appends:
        headers = [h for _, h in rb.iter_headers(data)]
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, max_ts_offset = h.max_timestamp, h.last_offset
        if since > interval:
            expected_offsets.append((headers[-1].last_offset, position))
            expected_times.append((max_ts, max_ts_offset))
            since = 0
        since += len(data)
        position += len(data)
        append(seg, data)
    assert len(expected_offsets) > 5
    assert index_entries(seg) == (expected_offsets, expected_times)
    assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == (max_ts,
                                                                               max_ts_offset)
    # Every offset is still found through the sparse index.
    for target in range(offset):
        found = seg.translate_offset(target)
        assert found is not None and found[1].base_offset <= target <= found[1].last_offset
    seg.close()


def test_append_rejects_offset_overflow_and_keeps_state_on_disk_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seg = open_seg(tmp_path, base=10, interval=0)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(10 + 2**31, 1, 10 + 2**31, make_batch(10 + 2**31))
    append(seg, make_batch(10, ts=500))
    size, entries = seg.size, index_entries(seg)

    def no_space(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(KafkaStorageError):
        append(seg, make_batch(11, ts=900))
    monkeypatch.undo()
    assert (seg.size, index_entries(seg), seg.max_timestamp_so_far) == (size, entries, 500)
    assert seg.read_next_offset() == 11
    seg.close()


# ----------------------------------------------------------------------------- recovery
def test_recover_of_valid_segment_truncates_nothing(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    before = index_entries(seg)
    seen: list[int] = []
    assert seg.recover(lambda h: seen.append(h.base_offset)) == 0
    assert seen == [3 * i for i in range(len(batches))]
    assert index_entries(seg)[0] == before[0]
    assert seg.max_timestamp_so_far == 1000 * len(batches) + 2
    append(seg, make_batch(3 * len(batches)))  # still appendable after the trim
    assert seg.read_next_offset() == 3 * len(batches) + 1
    seg.close()


def test_recover_after_truncation_at_every_byte_of_the_last_batch(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, n=4)
    seg.close()
    log_path = names.log_file(tmp_path, 0)
    prefix, last = b"".join(batches[:-1]), batches[-1]
    for kept in range(len(last)):
        log_path.write_bytes(prefix + last[:kept])
        seg = open_seg(tmp_path, interval=1, exists=True)
        assert seg.recover() == kept
        assert seg.size == len(prefix) == log_path.stat().st_size
        assert seg.read_next_offset() == 9
        seg.offset_index.sanity_check()
        seg.time_index.sanity_check()
        assert all(pos < seg.size for _, pos in index_entries(seg)[0])
        assert seg.max_timestamp_so_far == 3002
        append(seg, last)
        assert seg.read_next_offset() == 12
        seg.close()


def test_recover_truncates_at_a_flipped_byte(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, n=3)
    seg.close()
    log_path = names.log_file(tmp_path, 0)
    start = len(batches[0])
    original = b"".join(batches)
    # Every byte the batch framing or the CRC covers (the leader epoch, bytes 12-15, is not).
    positions = [p for p in range(8, len(batches[1])) if not 12 <= p < 16]
    # Base offset bits that break the offset order or range: the sign bit and bit 31.
    flips = [(p, 0x01) for p in positions] + [(0, 0x80), (4, 0x80)]
    for pos, bit in flips:
        data = bytearray(original)
        data[start + pos] ^= bit
        log_path.write_bytes(bytes(data))
        seg = open_seg(tmp_path, interval=1, exists=True)
        assert seg.recover() == len(original) - start, (pos, bit)
        assert seg.read_next_offset() == 3
        assert seg.size == start
        seg.close()


def test_recover_rejects_offsets_that_do_not_increase(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    append(seg, make_batch(0, 5))
    seg.log.append(make_batch(3, 1))  # bypasses the segment: overlapping offsets on disk
    assert seg.recover() == len(make_batch(3, 1))
    assert seg.read_next_offset() == 5
    seg.close()


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path)
    expected = index_entries(seg)
    seg.close()
    reopened = open_seg(tmp_path, interval=1, exists=True)
    expected_after_close = index_entries(reopened)  # plus the final time index entry
    reopened.close()
    assert expected_after_close[0] == expected[0]
    names.offset_index_file(tmp_path, 0).unlink()
    names.time_index_file(tmp_path, 0).unlink()
    seg = open_seg(tmp_path, interval=1, exists=True)
    with pytest.raises(CorruptIndexError, match="missing"):
        seg.offset_index.sanity_check()
    with pytest.raises(CorruptIndexError, match="missing"):
        seg.time_index.sanity_check()
    assert seg.recover() == 0
    seg.offset_index.sanity_check()
    seg.time_index.sanity_check()
    assert index_entries(seg) == expected_after_close
    seg.close()


def test_corrupt_index_is_detected_and_rebuilt(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path)
    seg.close()
    seg = open_seg(tmp_path, interval=1, exists=True)
    expected = index_entries(seg)
    seg.close()
    index_path = names.offset_index_file(tmp_path, 0)
    raw = bytearray(index_path.read_bytes())
    raw[0:8], raw[8:16] = raw[8:16], raw[0:8]  # two entries out of order
    index_path.write_bytes(bytes(raw))
    seg = open_seg(tmp_path, interval=1, exists=True)
    with pytest.raises(CorruptIndexError):
        seg.offset_index.sanity_check()
    seg.recover()
    assert index_entries(seg) == expected
    seg.close()


def test_untrimmed_indexes_after_a_crash_are_rebuilt(tmp_path: Path) -> None:
    live, crash = tmp_path / "live", tmp_path / "crash"
    live.mkdir(), crash.mkdir()
    seg, _ = filled(live)
    seg.flush()
    for p in live.iterdir():  # the files as a killed broker leaves them
        shutil.copy(p, crash / p.name)
    expected = index_entries(seg)[0]
    seg.close()
    crashed = open_seg(crash, interval=1, exists=True)
    assert crashed.offset_index.entries > len(expected)  # the zero tail counts
    with pytest.raises(CorruptIndexError):
        crashed.offset_index.sanity_check()
    assert crashed.recover() == 0
    assert index_entries(crashed)[0] == expected
    crashed.close()


def test_index_pointing_past_the_log_is_corrupt(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    seg.close()
    os.truncate(names.log_file(tmp_path, 0), len(batches[0]) + len(batches[1]))
    seg = open_seg(tmp_path, interval=1, exists=True)
    with pytest.raises(CorruptIndexError, match="past the end"):
        seg.offset_index.sanity_check()
    seg.recover()
    seg.offset_index.sanity_check()
    assert seg.read_next_offset() == 6
    seg.close()


def test_clean_reopen_restores_state_and_keeps_appending(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, interval=100)
    entries = index_entries(seg)[0]
    seg.close()
    seg = open_seg(tmp_path, interval=100, exists=True)
    seg.offset_index.sanity_check()
    seg.time_index.sanity_check()
    assert index_entries(seg)[0] == entries
    assert seg.max_timestamp_so_far == 1000 * len(batches) + 2
    assert seg.offset_of_max_timestamp_so_far == 3 * len(batches) - 1
    assert seg.read_next_offset() == 3 * len(batches)
    assert not seg.offset_index.is_full() and not seg.time_index.is_full()
    for i in range(len(batches), len(batches) + 5):
        append(seg, make_batch(3 * i, 3, ts=1000 * (i + 1)))
    assert seg.offset_index.entries > len(entries)
    assert seg.read_next_offset() == 3 * (len(batches) + 5)
    seg.close()


# --------------------------------------------------------------------------- truncation
@pytest.mark.parametrize(
    ("offset", "next_offset"),
    [(0, 0), (3, 3), (4, 3), (5, 3), (6, 6), (12, 12), (23, 21), (24, 24), (100, 24)],
)
def test_truncate_to(tmp_path: Path, offset: int, next_offset: int) -> None:
    seg, batches = filled(tmp_path)  # offsets 0..23 in batches of 3
    size = seg.size
    removed = seg.truncate_to(offset, now_ms=NOW + 5)
    kept = next_offset // 3
    assert seg.size == sum(len(b) for b in batches[:kept]) == size - removed
    assert seg.read_next_offset() == next_offset
    offsets, times = index_entries(seg)
    assert all(o < offset for o, _ in offsets) and all(o < offset for _, o in times)
    assert all(p < seg.size for _, p in offsets)
    expected_max = 1000 * kept + 2 if kept else -1
    assert seg.max_timestamp_so_far == expected_max
    assert seg.created_ms == (NOW + 5 if kept == 0 else NOW)
    for i in range(kept, kept + 3):  # appends resume with index entries
        append(seg, make_batch(3 * i, 3, ts=1000 * (i + 1)))
    assert seg.read_next_offset() == 3 * (kept + 3)
    seg.offset_index.sanity_check()
    seg.time_index.sanity_check()
    seg.close()


# ------------------------------------------------------------------------------ rolling
def params(seg: LogSegment, *, max_bytes: int = 10**9, max_ms: int = 10**9, max_ts: int = -1,
           max_offset: int = 0, size: int = 100, now: int = NOW) -> RollParams:
    return RollParams(max_segment_bytes=max_bytes, max_segment_ms=max_ms,
                      max_timestamp_in_messages=max_ts, max_offset_in_messages=max_offset,
                      messages_size=size, now_ms=now)


def test_should_roll_on_size(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    assert not seg.should_roll(params(seg, max_bytes=100, size=100))
    append(seg, make_batch(0))
    s = seg.size
    assert not seg.should_roll(params(seg, max_bytes=s + 50, size=50))
    assert seg.should_roll(params(seg, max_bytes=s + 49, size=50))
    seg.close()


def test_should_roll_on_time_of_first_batch(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    assert not seg.should_roll(params(seg, max_ms=10, max_ts=10**12, now=NOW + 10**9))  # empty
    append(seg, make_batch(0, ts=5_000))
    append(seg, make_batch(1, ts=9_000))
    assert not seg.should_roll(params(seg, max_ms=1_000, max_ts=6_000, max_offset=2))
    assert seg.should_roll(params(seg, max_ms=1_000, max_ts=6_001, max_offset=2))
    assert seg.time_waited_for_roll(NOW, 7_000) == 2_000
    seg.close()
    reopened = open_seg(tmp_path, exists=True)  # the first batch's timestamp is read back
    assert reopened.time_waited_for_roll(NOW, 7_000) == 2_000
    reopened.close()


def test_should_roll_on_age_without_timestamps(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    append(seg, make_batch(0, timestamps=[-1]))
    assert not seg.should_roll(params(seg, max_ms=1_000, now=NOW + 1_000, max_offset=1))
    assert seg.should_roll(params(seg, max_ms=1_000, now=NOW + 1_001, max_offset=1))
    seg.close()


def test_should_roll_when_an_index_is_full(tmp_path: Path) -> None:
    seg = open_seg(tmp_path, interval=0, max_index=36)  # time index: 3 slots, 1 reserved
    append(seg, make_batch(0, ts=1))
    assert not seg.should_roll(params(seg, max_offset=1))
    append(seg, make_batch(1, ts=2))
    assert not seg.should_roll(params(seg, max_offset=2))
    append(seg, make_batch(2, ts=3))
    assert seg.time_index.is_full()
    assert seg.should_roll(params(seg, max_offset=3))
    seg.on_become_inactive_segment()  # the reserved slot takes the final entry
    assert seg.time_index.last_entry == (3, 2)
    seg.close()


def test_should_roll_on_relative_offset_overflow(tmp_path: Path) -> None:
    seg = open_seg(tmp_path, base=1000)
    append(seg, make_batch(1000))
    assert not seg.should_roll(params(seg, max_offset=1000 + 2**31 - 1))
    assert seg.should_roll(params(seg, max_offset=1000 + 2**31))
    seg.close()


# -------------------------------------------------------------------------- timestamps
def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    seg = open_seg(tmp_path, interval=1)
    append(seg, make_batch(0, timestamps=[100, 300, 200]))
    append(seg, make_batch(3, timestamps=[250, 400]))
    append(seg, make_batch(5, timestamps=[500, 600]))
    append(seg, make_batch(7, timestamps=[550]))
    cases = {(50, 0): (100, 0), (150, 0): (300, 1), (300, 0): (300, 1), (260, 0): (300, 1),
             (301, 0): (400, 4), (550, 0): (600, 6), (601, 0): None, (0, 2): (200, 2),
             (0, 5): (500, 5), (260, 2): (400, 4), (550, 7): (550, 7)}
    for (ts, start), expected in cases.items():
        assert seg.find_offset_by_timestamp(ts, start) == expected, (ts, start)
    seg.close()
    seg = open_seg(tmp_path, interval=1, exists=True)  # same answers from the files
    for (ts, start), expected in cases.items():
        assert seg.find_offset_by_timestamp(ts, start) == expected, (ts, start)
    seg.close()


def test_max_and_largest_timestamp(tmp_path: Path) -> None:
    seg = open_seg(tmp_path)
    assert seg.max_timestamp_so_far == -1
    assert seg.largest_timestamp == seg.last_modified > 0
    append(seg, make_batch(0, timestamps=[-1]))
    assert seg.largest_timestamp == seg.last_modified
    append(seg, make_batch(1, timestamps=[700, 900]))
    append(seg, make_batch(3, timestamps=[900]))
    append(seg, make_batch(4, timestamps=[800]))
    assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == (900, 2)
    assert seg.largest_timestamp == 900
    seg.close()


# ---------------------------------------------------------------------------- lifecycle
def test_on_become_inactive_segment_trims(tmp_path: Path) -> None:
    config = SegmentConfig(index_interval_bytes=1, preallocate=True, init_file_size=1 << 16)
    seg = LogSegment.open(tmp_path, 0, config, now_ms=NOW)
    assert names.log_file(tmp_path, 0).stat().st_size == 1 << 16
    for i in range(4):
        append(seg, make_batch(i, ts=100 + i))
    seg.on_become_inactive_segment()
    assert names.offset_index_file(tmp_path, 0).stat().st_size == 8 * seg.offset_index.entries
    assert names.time_index_file(tmp_path, 0).stat().st_size == 12 * seg.time_index.entries
    assert names.log_file(tmp_path, 0).stat().st_size == seg.size
    assert seg.time_index.last_entry == (103, 3)
    seg.close()


def test_change_file_suffixes_and_delete(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    seg.change_file_suffixes("", names.DELETED_FILE_SUFFIX)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    fetched = seg.read(0, 10**6)
    assert fetched is not None and fetched.read_bytes() == b"".join(batches)
    with pytest.raises(ValueError):
        seg.change_file_suffixes(".swap", "")
    seg.delete()
    assert list(tmp_path.iterdir()) == []


def test_open_with_file_suffix(tmp_path: Path) -> None:
    seg = open_seg(tmp_path, base=42, suffix=names.CLEANED_FILE_SUFFIX)
    append(seg, make_batch(42))
    seg.change_file_suffixes(names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)
    seg.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
    seg.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]
    again = open_seg(tmp_path, base=42, exists=True)
    assert again.read_next_offset() == 43
    again.close()


def test_flush_and_close_are_safe_to_repeat(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path)
    for step in (seg.flush, seg.flush, seg.close, seg.close):
        step()
    with pytest.raises(FileNotFoundError):
        open_seg(tmp_path, base=7, exists=True)
