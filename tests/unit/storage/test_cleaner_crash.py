"""Crash safety of compaction: the process dies after every file rename or unlink of the
cleaner's swap (and while a cleaned segment is being written); a reload must find a consistent
log that still holds the latest record of every key at its original offset, nothing that was
never written, no in-transit files, and that compacts cleanly afterwards."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.storage import record_batch as rb
from strata.storage.abstract_index import AbstractIndex
from strata.storage.cleaner import Cleaner
from strata.storage.clock import ManualClock
from strata.storage.file_records import FileRecords
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_segment import LogSegment
from strata.storage.offset_map import OffsetMap
from strata.storage.records import RecordSpec, build_batch, iter_records
from strata.storage.segment_swap import complete_swaps

T0 = 1_700_000_000_000
CONFIG = LogConfig.from_props({
    "cleanup.policy": "compact", "segment.bytes": "1500", "index.interval.bytes": "300",
    "segment.index.bytes": "4096",
})
KEYS = 5
N = 48
ROLL_EVERY = 8  # six segments of ~700 bytes: the round cleans them in groups of two


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests kill the process, not the machine: page cache survives, fsync is moot."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


class Crash(BaseException):
    """The process dies here (not an Exception: nothing may catch and tidy up)."""


Original = dict[int, tuple[bytes | None, bytes | None]]


def build(path: Path, clock: ManualClock) -> tuple[Log, Original]:
    log = load_log(path, CONFIG, clock)
    original: Original = {}
    for i in range(N):
        key = b"key-%d" % (i % KEYS)
        value = None if i % 17 == 0 else b"value-%d" % i  # some tombstones
        info = log.append_as_leader(
            build_batch([RecordSpec(key=key, value=value, timestamp=clock.milliseconds())]), 0)
        original[info.first_offset] = (key, value)
        clock.advance(1)
        if (i + 1) % ROLL_EVERY == 0:
            log.roll()
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, original


def records(log: Log) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    for seg in log.segments:
        for pos, header in seg.batches():
            for r in iter_records(seg.log.read(pos, header.size)):
                yield r.offset, r.key, r.value


def latest_per_key(original: Original, below: int) -> dict[bytes | None, int]:
    latest: dict[bytes | None, int] = {}
    for offset in sorted(original):
        if offset < below:
            latest[original[offset][0]] = offset
    return latest


def clean(log: Log, clock: ManualClock, **kw: Any) -> None:
    Cleaner(OffsetMap(1 << 20), clock=clock).clean(
        log, 0, log.active_segment.base_offset, clock.milliseconds(), **kw)


def crash_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> Callable[[], int]:
    """Make the ``steps + 1``-th rename or unlink of a segment file raise ``Crash``; returns a
    counter of the operations done."""
    done = 0

    def wrap(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def op(self: Any, *args: Any) -> Any:
            nonlocal done
            if done >= steps:
                raise Crash(f"{name} #{done + 1}")
            done += 1
            return original(self, *args)

        monkeypatch.setattr(cls, name, op)

    for cls in (FileRecords, AbstractIndex):
        wrap(cls, "rename_to")
        wrap(cls, "delete")
    return lambda: done


def count_swap_operations(tmp_path: Path) -> int:
    with pytest.MonkeyPatch.context() as mp:
        clock = ManualClock(T0)
        log, _ = build(tmp_path / "count-0", clock)
        counter = crash_after(mp, 10**9)
        clean(log, clock)
        return counter()


def check_consistent(path: Path, clock: ManualClock, original: Original, end: int,
                     **load: Any) -> None:
    in_transit = [p.name for p in path.iterdir()
                  if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    log = load_log(path, CONFIG, clock, **load)
    try:
        assert not [p.name for p in path.iterdir()
                    if p.name.endswith((".cleaned", ".swap", ".deleted"))], in_transit
        assert log.log_end_offset == N
        got = list(records(log))
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets)), "offsets must strictly increase"
        for offset, key, value in got:
            assert original[offset] == (key, value), f"offset {offset} changed"
        present = set(offsets)
        for key, offset in latest_per_key(original, end).items():
            assert offset in present, f"latest record of {key!r} at {offset} lost"
        assert all(o in present for o in original if o >= end)
        # Indexes work: every kept offset is found by a read.
        for offset in offsets:
            data = log.read(offset, 1 << 16).read_bytes()
            assert rb.parse_header(data).last_offset >= offset
        # The log compacts again to the fully compacted state.
        log.update_high_watermark(log.log_end_offset)
        clean(log, clock)
        final = {o for o, _, v in records(log)}
        assert {o for o in latest_per_key(original, end).values()} <= final
    finally:
        log.close()


RELOADS = {
    "scan-all": {"recovery_point": 0},
    "sanity-checks-only": {"recovery_point": N},
}


def test_the_swap_has_many_crash_points(tmp_path: Path) -> None:
    # Per group of two: 3 files .cleaned->.swap, 2x3 old ->.deleted, 3 .swap->final. The old
    # files' unlinks come later (file.delete.delay.ms, so in-flight reads keep working).
    assert count_swap_operations(tmp_path) == 3 * 12


@pytest.mark.parametrize("reload", sorted(RELOADS))
def test_crash_at_every_step_of_the_swap(tmp_path: Path, reload: str) -> None:
    total = count_swap_operations(tmp_path)
    for steps in range(total):
        clock = ManualClock(T0)
        path = tmp_path / f"s{steps}-0"
        log, original = build(path, clock)
        end = log.active_segment.base_offset
        with pytest.MonkeyPatch.context() as mp:
            crash_after(mp, steps)
            with pytest.raises(Crash):
                clean(log, clock)
        del log  # the process is gone: nothing is closed or flushed
        check_consistent(path, clock, original, end, **RELOADS[reload])


@pytest.mark.parametrize("appends", [0, 1, 2, 4])
def test_crash_while_writing_a_cleaned_segment(tmp_path: Path, appends: int) -> None:
    clock = ManualClock(T0)
    path = tmp_path / "t-0"
    log, original = build(path, clock)
    end = log.active_segment.base_offset
    done = 0
    real_append = LogSegment.append

    def append(self: LogSegment, *args: Any) -> None:
        nonlocal done
        if self.log.path.name.endswith(".cleaned"):
            if done == appends:
                raise Crash("killed while writing")
            done += 1
        real_append(self, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LogSegment, "append", append)
        with pytest.raises(Crash):
            clean(log, clock)
    assert any(p.name.endswith(".log.cleaned") for p in path.iterdir())
    del log
    check_consistent(path, clock, original, end, recovery_point=0)


def test_complete_swaps_is_a_no_op_on_a_clean_directory(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log, _ = build(tmp_path / "t-0", clock)
    clean(log, clock)
    assert log.delete_pending_segments(force=True) > 0  # the replaced segments' .deleted files
    names = sorted(p.name for p in log.dir.iterdir())
    assert complete_swaps(log.dir) == []
    assert sorted(p.name for p in log.dir.iterdir()) == names
    log.close()


def test_uncommitted_index_swaps_are_rolled_back(tmp_path: Path) -> None:
    """Index files renamed to .swap while the .log is still .cleaned (a rename order other than
    the log's first) must not overwrite the old segment's indexes."""
    clock = ManualClock(T0)
    path = tmp_path / "t-0"
    log, original = build(path, clock)
    old_index = (path / "00000000000000000000.index").read_bytes()
    (path / "00000000000000000000.log.cleaned").write_bytes(b"")
    (path / "00000000000000000000.index.swap").write_bytes(b"\0" * 8)
    log.close()
    assert complete_swaps(path) == []
    assert (path / "00000000000000000000.index").read_bytes() == old_index
    assert not [p for p in path.iterdir() if p.name.endswith((".swap", ".cleaned"))]
    check_consistent(path, clock, original, 0, recovery_point=N)
