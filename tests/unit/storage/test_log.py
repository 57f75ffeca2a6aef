"""Log: append/read across rolls, offsets, retention, truncation, time lookups, idempotence,
disk errors and restarts — on real files in a temp dir, with a manual clock."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_results import FetchDataInfo
from strata.storage.records import Record, RecordSpec, build_batch, iter_records


def batch(values: list[bytes], ts: int = 1_700_000_000_000, **kw: int) -> bytes:
    return build_batch([RecordSpec(key=v[:1], value=v, timestamp=ts) for v in values], **kw)


def records_of(data: bytes) -> Iterator[Record]:
    """Every record in whole batches of ``data`` (a trailing partial batch is ignored)."""
    pos = 0
    while True:
        size = rb.peek_size(data, pos)
        if size is None or pos + size > len(data):
            return
        yield from iter_records(data, pos)
        pos += size


def read_all(log: Log, start: int = 0, upper: int | None = None) -> list[Record]:
    out: list[Record] = []
    offset = max(start, log.log_start_offset)
    end = log.log_end_offset if upper is None else upper
    while offset < end:
        info = log.read(offset, 1 << 20, upper)
        got = [r for r in records_of(info.read_bytes()) if r.offset >= offset]
        if not got:
            break
        out.extend(got)
        offset = got[-1].offset + 1
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


def open_log(path: Path, clock: ManualClock, overrides: Mapping[str, str] | None = None,
             **kw: object) -> Log:
    return load_log(path, LogConfig.from_props(overrides or {}), clock, **kw)  # type: ignore[arg-type]


def test_append_assigns_offsets_and_epoch_and_reads_back(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    info = log.append_as_leader(batch([b"a", b"b", b"c"]), leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    info2 = log.append_as_leader(batch([b"d"]), leader_epoch=3)
    assert (info2.first_offset, info2.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    data = log.read(0, 1 << 20).read_bytes()
    headers = list(rb.iter_headers(data))
    assert [h.base_offset for _, h in headers] == [0, 3]
    assert all(h.partition_leader_epoch == 3 for _, h in headers)
    assert [r.value for r in records_of(data)] == [b"a", b"b", b"c", b"d"]
    assert log.latest_epoch == 3


def test_rolls_on_segment_bytes_and_reads_across_segments(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "300"})
    for i in range(20):
        log.append_as_leader(batch([b"v%03d" % i, b"w%03d" % i]), leader_epoch=0)
    assert len(log.segments) > 3
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    values = [r.value for r in read_all(log)]
    assert values == [v for i in range(20) for v in (b"v%03d" % i, b"w%03d" % i)]
    assert [r.offset for r in read_all(log)] == list(range(40))


def test_roll_on_segment_ms(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.ms": "1000"})
    log.append_as_leader(batch([b"a"], ts=clock.milliseconds()), leader_epoch=0)
    clock.advance(1500)
    log.append_as_leader(batch([b"b"], ts=clock.milliseconds()), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_read_bounds(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for i in range(5):
        log.append_as_leader(batch([b"x%d" % i]), leader_epoch=0)
    assert log.read(5, 1000).size == 0  # at LEO: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1000)
    # The high watermark bounds what a consumer sees.
    assert [r.offset for r in read_all(log, 0, upper=3)] == [0, 1, 2]
    assert log.read(3, 1000, upper_bound=3).size == 0


def test_min_one_message_returns_a_whole_oversized_batch(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    big = batch([b"z" * 5000])
    log.append_as_leader(big, leader_epoch=0)
    info = log.read(0, 100, min_one_message=True)
    assert info.size == len(big)
    assert log.read(0, 100, min_one_message=False).size <= 100


def test_reader_snapshot_survives_retention(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200", "retention.ms": "1000",
                                              "file.delete.delay.ms": "0"})
    old_ts = clock.milliseconds()
    for i in range(10):
        log.append_as_leader(batch([b"old%d" % i], ts=old_ts), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    in_flight: FetchDataInfo = log.read(0, 1 << 20)
    clock.advance(5000)
    log.append_as_leader(batch([b"new"], ts=clock.milliseconds()), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert deleted >= 1
    assert log.log_start_offset == log.segments[0].base_offset > 0
    # The read taken before deletion still returns its bytes (fds stay open until unlink).
    assert next(r.value for r in records_of(in_flight.read_bytes())) == b"old0"
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.delete_pending_segments()
    assert not list(log.dir.glob("*.deleted"))
    assert read_all(log)[-1].value == b"new"


def test_retention_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200", "retention.bytes": "400"})
    for i in range(20):
        log.append_as_leader(batch([b"r%02d" % i]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    before = log.size
    assert log.delete_old_segments() > 0
    assert log.size < before
    assert log.size - log.active_segment.size <= 400
    assert read_all(log)[-1].value == b"r19"


def test_retention_never_passes_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200", "retention.ms": "10"})
    for i in range(10):
        log.append_as_leader(batch([b"h%d" % i]), leader_epoch=0)
    clock.advance(1000)
    log.update_high_watermark(0)
    assert log.delete_old_segments() == 0
    assert log.log_start_offset == 0


def test_compact_only_policy_skips_time_retention(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200", "retention.ms": "10",
                                              "cleanup.policy": "compact"})
    for i in range(10):
        log.append_as_leader(batch([b"c%d" % i]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(1000)
    assert log.delete_old_segments() == 0


def test_delete_records_before(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200"})
    for i in range(10):
        log.append_as_leader(batch([b"d%d" % i]), leader_epoch=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(5)  # above the HW (still 0)
    log.update_high_watermark(10)
    assert log.delete_records_before(5) == 5
    assert [r.offset for r in read_all(log)] == [5, 6, 7, 8, 9]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)


def test_truncate_to_and_continue(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "200"})
    for i in range(10):
        log.append_as_leader(batch([b"t%d" % i]), leader_epoch=i // 5)
    assert log.truncate_to(4)
    assert log.log_end_offset == 4
    assert log.latest_epoch == 0  # epoch 1 started at offset 5: gone
    info = log.append_as_leader(batch([b"again"]), leader_epoch=2)
    assert info.first_offset == 4
    assert [r.value for r in read_all(log)] == [b"t0", b"t1", b"t2", b"t3", b"again"]
    assert not log.truncate_to(100)


def test_truncate_fully_and_start_at(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    for i in range(3):
        log.append_as_leader(batch([b"f%d" % i]), leader_epoch=0)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(batch([b"x"]), leader_epoch=1).first_offset == 100


def test_fetch_offset_by_timestamp(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"segment.bytes": "250"})
    base = 1_000_000
    for i in range(10):
        log.append_as_leader(batch([b"a%d" % i, b"b%d" % i], ts=base + i * 100), leader_epoch=0)
    found = log.fetch_offset_by_timestamp(base + 250)
    assert found is not None and (found.timestamp, found.offset) == (base + 300, 6)
    found = log.fetch_offset_by_timestamp(base)
    assert found is not None and found.offset == 0
    assert log.fetch_offset_by_timestamp(base + 10_000) is None
    earliest = log.fetch_offset_by_timestamp(-2)
    latest = log.fetch_offset_by_timestamp(-1)
    assert earliest is not None and earliest.offset == 0
    assert latest is not None and latest.offset == 20
    mx = log.fetch_offset_by_timestamp(-3)
    assert mx is not None and mx.timestamp == base + 900 and mx.offset in (18, 19)


def test_log_append_time(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(batch([b"x"], ts=5), leader_epoch=0)
    assert info.log_append_time == clock.milliseconds()
    data = log.read(0, 1000).read_bytes()
    header = rb.parse_and_verify(data)  # CRC recomputed
    assert header.timestamp_type == 1 and header.max_timestamp == clock.milliseconds()


def test_idempotent_duplicates_and_errors(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    first = log.append_as_leader(batch([b"a", b"b"], producer_id=7, producer_epoch=0,
                                       base_sequence=0), leader_epoch=0)
    log.append_as_leader(batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2),
                         leader_epoch=0)
    dup = log.append_as_leader(batch([b"a", b"b"], producer_id=7, producer_epoch=0,
                                     base_sequence=0), leader_epoch=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (first.first_offset, 1)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch([b"gap"], producer_id=7, producer_epoch=0, base_sequence=9),
                             leader_epoch=0)
    log.append_as_leader(batch([b"e1"], producer_id=7, producer_epoch=1, base_sequence=0),
                         leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(batch([b"old"], producer_id=7, producer_epoch=0, base_sequence=3),
                             leader_epoch=0)
    assert log.log_end_offset == 4


def test_producer_state_survives_restart(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock)
    log.append_as_leader(batch([b"a"], producer_id=9, producer_epoch=0, base_sequence=0),
                         leader_epoch=0)
    log.flush()
    # Unclean: no close, state rebuilt by replaying the log.
    log2 = open_log(path, clock, recovery_point=0)
    dup = log2.append_as_leader(batch([b"a"], producer_id=9, producer_epoch=0,
                                      base_sequence=0), leader_epoch=0)
    assert dup.duplicate and dup.first_offset == 0


def test_clean_restart_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock, {"segment.bytes": "300"})
    for i in range(15):
        log.append_as_leader(batch([b"p%d" % i]), leader_epoch=1)
    log.flush()
    end, rp = log.log_end_offset, log.recovery_point
    log.close()
    log2 = open_log(path, clock, {"segment.bytes": "300"}, recovery_point=rp,
                    had_clean_shutdown=True)
    assert log2.log_end_offset == end
    assert [r.value for r in read_all(log2)] == [b"p%d" % i for i in range(15)]
    assert log2.append_as_leader(batch([b"next"]), leader_epoch=1).first_offset == end


def test_flush_moves_recovery_point(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"flush.messages": "3"})
    log.append_as_leader(batch([b"a", b"b"]), leader_epoch=0)
    assert not log.needs_flush()
    log.append_as_leader(batch([b"c"]), leader_epoch=0)
    assert log.needs_flush()
    log.flush()
    assert log.recovery_point == 3 and not log.needs_flush()


def test_flush_ms(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, {"flush.ms": "1000"})
    log.append_as_leader(batch([b"a"]), leader_epoch=0)
    assert not log.needs_flush()
    clock.advance(1001)
    assert log.needs_flush()


def test_disk_error_fails_the_append_and_takes_the_log_offline(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[Path] = []
    log = open_log(tmp_path / "t-0", clock, on_storage_error=lambda d, e: errors.append(d))
    log.append_as_leader(batch([b"ok"]), leader_epoch=0)

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    monkeypatch.setattr(os, "writev", full_disk)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch([b"lost"]), leader_epoch=0)
    monkeypatch.undo()
    assert log.log_end_offset == 1 and errors == [log.dir]
    with pytest.raises(LogDirOfflineError):
        log.append_as_leader(batch([b"later"]), leader_epoch=0)
    # What was acknowledged is intact on disk.
    log2 = open_log(tmp_path / "t-0", clock, recovery_point=0)
    assert [r.value for r in read_all(log2)] == [b"ok"]


def test_follower_append_keeps_leader_offsets(tmp_path: Path, clock: ManualClock) -> None:
    leader = open_log(tmp_path / "l-0", clock)
    for i in range(4):
        leader.append_as_leader(batch([b"m%d" % i]), leader_epoch=5)
    follower = open_log(tmp_path / "f-0", clock)
    fetched = leader.read(0, 1 << 20).read_bytes()
    info = follower.append_as_follower(fetched)
    assert (info.first_offset, info.last_offset) == (0, 3)
    assert follower.log_end_offset == 4 and follower.latest_epoch == 5
    assert follower.end_offset_for_epoch(5) == (5, 4)
    with pytest.raises(OffsetOutOfRangeError):
        follower.append_as_follower(fetched)


def test_flush_and_close_make_the_appended_epochs_durable(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch assigned on the append path is written without fsync (KAFKA-15046); the log
    syncs it before its recovery point moves (flush) and before a clean shutdown (close)."""
    log = open_log(tmp_path / "t-0", clock)
    synced: list[int] = []
    real_sync = log.leader_epoch_cache.sync

    def sync() -> None:
        synced.append(log.log_end_offset)
        real_sync()

    monkeypatch.setattr(log.leader_epoch_cache, "sync", sync)
    log.append_as_leader(batch([b"a"]), leader_epoch=1)
    log.append_as_leader(batch([b"b"]), leader_epoch=2)
    assert synced == []
    log.flush()
    assert synced == [2] and log.recovery_point == 2
    log.append_as_leader(batch([b"c"]), leader_epoch=3)
    log.close()
    assert synced == [2, 3]
    reopened = open_log(tmp_path / "t-0", clock)
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epoch_cache.epoch_entries()] \
        == [(1, 0), (2, 1), (3, 2)]
