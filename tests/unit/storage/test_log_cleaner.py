"""Choosing logs to compact, the cleaner checkpoint, abort/pause/resume, and ``clean_one`` end to
end over real logs in two data dirs with a manual clock."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.cleaner import Cleaner, LogCleaningAbortedError
from strata.storage.clock import ManualClock
from strata.storage.errors import InvalidConfigError, KafkaStorageError
from strata.storage.log import Log
from strata.storage.log_cleaner import CleanerConfig, LogCleaner
from strata.storage.log_cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleanerManager,
    LogToClean,
    TopicPartition,
    cleanable_offsets,
    max_compaction_delay_ms,
)
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_segment import LogSegment
from strata.storage.records import RecordSpec, build_batch

T0 = 1_700_000_000_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1000", "segment.index.bytes": "4096"}
SMALL = CleanerConfig(dedupe_buffer_size=1 << 20)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def open_log(path: Path, clock: ManualClock, **overrides: str) -> Log:
    props = {**COMPACT, **{k.replace("_", "."): v for k, v in overrides.items()}}
    return load_log(path, LogConfig.from_props(props), clock)


def fill(log: Log, clock: ManualClock, n: int, keys: int, start: int = 0) -> None:
    for i in range(start, start + n):
        log.append_as_leader(build_batch([RecordSpec(
            key=b"key-%d" % (i % keys), value=b"value-%d" % i, timestamp=clock.milliseconds())]),
            0)
        clock.advance(1)
    log.update_high_watermark(log.log_end_offset)


class Logs:
    """The log manager's ``all_logs`` stand-in."""

    def __init__(self) -> None:
        self.logs: dict[TopicPartition, Log] = {}

    def __call__(self) -> Mapping[TopicPartition, Log]:
        return dict(self.logs)


@pytest.fixture
def logs() -> Logs:
    return Logs()


def filled_log(tmp_path: Path, clock: ManualClock, logs: Logs, n: int = 100) -> Log:
    """Partition a-0 in log dir d1, in ``logs``, with ``n`` records over 5 keys."""
    log = logs.logs[("a", 0)] = open_log(tmp_path / "d1" / "a-0", clock)
    fill(log, clock, n, keys=5)
    return log


def failing_cleaner(tmp_path: Path, clock: ManualClock, logs: Logs,
                    monkeypatch: pytest.MonkeyPatch, error: Exception) -> LogCleaner:
    """A cleaner of ``filled_log`` whose every round raises ``error``."""
    filled_log(tmp_path, clock, logs)

    def broken(*args: Any, **kw: Any) -> None:
        raise error

    monkeypatch.setattr(Cleaner, "clean", broken)
    return LogCleaner(SMALL, [tmp_path / "d1"], logs, clock=clock)


def keys_and_values(log: Log) -> dict[bytes | None, bytes | None]:
    from strata.storage.records import iter_records

    out: dict[bytes | None, bytes | None] = {}
    for seg in log.segments:
        for pos, header in seg.batches():
            for r in iter_records(seg.log.read(pos, header.size)):
                out[r.key] = r.value
    return out


# ---------------------------------------------------------------------------------- config
def test_cleaner_config_from_broker_props() -> None:
    assert CleanerConfig.from_props({}) == CleanerConfig()
    config = CleanerConfig.from_props({
        "log.cleaner.enable": "false", "log.cleaner.threads": "2",
        "log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.io.buffer.load.factor": "0.5",
        "log.cleaner.backoff.ms": "100",
    })
    assert (config.enable, config.threads, config.dedupe_buffer_size) == (False, 2, 1 << 20)
    assert (config.io_buffer_load_factor, config.backoff_ms) == (0.5, 100)
    for bad in ({"log.cleaner.threads": "0"}, {"log.cleaner.enable": "yes"},
                {"log.cleaner.io.buffer.load.factor": "2"},
                {"log.cleaner.dedupe.buffer.size": "10"}, {"log.cleaner.threads": "x"}):
        with pytest.raises(InvalidConfigError):
            CleanerConfig.from_props(bad)


# ---------------------------------------------------------------------- cleanable offsets
def test_cleanable_offsets_stop_at_the_active_segment_and_high_watermark(
        tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 100, keys=5)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    offsets = cleanable_offsets(log, None, clock.milliseconds())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_offset) == (0, bases[-1])
    # The high watermark inside a segment: rounded down to that segment's base.
    log.update_high_watermark(bases[2] + 1)
    assert cleanable_offsets(log, None, clock.milliseconds()).first_uncleanable_offset == bases[2]
    # The checkpoint sets the first dirty offset; the range never goes below it.
    log.update_high_watermark(log.log_end_offset)
    offsets = cleanable_offsets(log, bases[1] + 3, clock.milliseconds())
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (bases[1] + 3, False)
    assert cleanable_offsets(log, 10_000, clock.milliseconds()).force_update_checkpoint
    log.delete_records_before(bases[1])
    reset = cleanable_offsets(log, 0, clock.milliseconds())
    assert (reset.first_dirty_offset, reset.force_update_checkpoint) == (bases[1], True)


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path,
                                                      clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, min_compaction_lag_ms="1000")
    fill(log, clock, 40, keys=5)
    clock.advance(5000)
    fill(log, clock, 60, keys=5, start=40)
    young = next(s for s in log.segments if s.largest_timestamp > clock.milliseconds() - 1000)
    offsets = cleanable_offsets(log, None, clock.milliseconds())
    assert offsets.first_uncleanable_offset == young.base_offset
    assert offsets.first_uncleanable_offset < log.active_segment.base_offset
    clock.advance(2000)
    offsets = cleanable_offsets(log, None, clock.milliseconds())
    assert offsets.first_uncleanable_offset == log.active_segment.base_offset


def test_max_compaction_delay(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock, max_compaction_lag_ms="10000")
    fill(log, clock, 50, keys=5)
    assert max_compaction_delay_ms(log, 0, clock.milliseconds()) == 0
    clock.advance(20_000)
    assert max_compaction_delay_ms(log, 0, clock.milliseconds()) == 20_000 + 50 - 10_000
    assert max_compaction_delay_ms(log, log.active_segment.base_offset,
                                   clock.milliseconds()) == 0


def test_log_to_clean_ratio(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", clock)
    fill(log, clock, 100, keys=5)
    segs = log.segments
    offsets = cleanable_offsets(log, segs[2].base_offset, clock.milliseconds())
    ltc = LogToClean.of(("t", 0), log, offsets)
    assert ltc.clean_bytes == segs[0].size + segs[1].size
    assert ltc.cleanable_bytes == sum(s.size for s in segs[2:-1])
    assert ltc.cleanable_ratio == pytest.approx(ltc.cleanable_bytes / ltc.total_bytes)


# -------------------------------------------------------------------------------- manager
def test_grab_chooses_the_dirtiest_compacted_log(tmp_path: Path, clock: ManualClock,
                                                 logs: Logs) -> None:
    a = logs.logs[("a", 0)] = open_log(tmp_path / "d1" / "a-0", clock)
    b = logs.logs[("b", 0)] = open_log(tmp_path / "d2" / "b-0", clock)
    logs.logs[("plain", 0)] = load_log(tmp_path / "d1" / "plain-0",
                                       LogConfig.from_props({"segment.bytes": "1000"}), clock)
    fill(a, clock, 100, keys=5)
    fill(b, clock, 100, keys=5)
    fill(logs.logs[("plain", 0)], clock, 300, keys=5)
    manager = LogCleanerManager([tmp_path / "d1", tmp_path / "d2"], logs)
    # b was half cleaned already: a is dirtier.
    manager.update_checkpoints(tmp_path / "d2", (("b", 0), b.segments[3].base_offset))
    first = manager.grab_filthiest_compacted_log(clock.milliseconds())
    assert first is not None and first.topic_partition == ("a", 0)
    assert manager.cleaning_state(("a", 0)) == "in progress"
    second = manager.grab_filthiest_compacted_log(clock.milliseconds())
    assert second is not None and second.topic_partition == ("b", 0)
    assert manager.grab_filthiest_compacted_log(clock.milliseconds()) is None
    manager.done_cleaning(("a", 0), tmp_path / "d1", 42)
    assert manager.all_cleaner_checkpoints()[("a", 0)] == 42
    assert OffsetCheckpointFile(tmp_path / "d1" / CLEANER_OFFSET_CHECKPOINT).read() == {
        ("a", 0): 42}


def test_dirty_ratio_and_max_compaction_lag_decide(tmp_path: Path, clock: ManualClock,
                                                   logs: Logs) -> None:
    log = logs.logs[("a", 0)] = open_log(tmp_path / "d1" / "a-0", clock,
                                         min_cleanable_dirty_ratio="0.9",
                                         max_compaction_lag_ms="60000")
    fill(log, clock, 100, keys=5)
    manager = LogCleanerManager([tmp_path / "d1"], logs)
    manager.update_checkpoints(tmp_path / "d1", (("a", 0), log.segments[2].base_offset))
    assert manager.grab_filthiest_compacted_log(clock.milliseconds()) is None  # ratio < 0.9
    clock.advance(120_000)
    chosen = manager.grab_filthiest_compacted_log(clock.milliseconds())
    assert chosen is not None and chosen.needs_compaction_now


def test_abort_pause_and_resume(tmp_path: Path, clock: ManualClock, logs: Logs) -> None:
    log = filled_log(tmp_path, clock, logs)
    manager = LogCleanerManager([tmp_path / "d1"], logs)
    tp = ("a", 0)
    assert manager.abort_and_pause_cleaning(tp) is False  # idle: just paused
    assert manager.cleaning_state(tp) == "paused"
    assert manager.grab_filthiest_compacted_log(clock.milliseconds()) is None
    manager.resume_cleaning(tp)
    with pytest.raises(ValueError):
        manager.resume_cleaning(tp)
    assert manager.grab_filthiest_compacted_log(clock.milliseconds()) is not None
    assert manager.abort_and_pause_cleaning(tp) is True  # in progress: aborted
    assert manager.cleaning_state(tp) == "aborted"
    with pytest.raises(LogCleaningAbortedError):
        manager.check_cleaning_aborted(tp)
    with pytest.raises(LogCleaningAbortedError):
        manager.swap_unless_aborted(tp, log)([], [])
    manager.done_cleaning(tp, tmp_path / "d1", 99)  # aborted: no checkpoint
    assert manager.all_cleaner_checkpoints() == {}
    assert manager.cleaning_state(tp) == "paused"
    manager.resume_cleaning(tp)
    assert manager.cleaning_state(tp) is None


def test_checkpoint_maintenance(tmp_path: Path, logs: Logs) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d1.mkdir()
    d2.mkdir()
    OffsetCheckpointFile(d1 / CLEANER_OFFSET_CHECKPOINT).write({("a", 0): 50, ("b", 1): 7})
    manager = LogCleanerManager([d1, d2], logs)
    assert manager.all_cleaner_checkpoints() == {("a", 0): 50, ("b", 1): 7}
    manager.maybe_truncate_checkpoint(d1, ("a", 0), 60)
    manager.maybe_truncate_checkpoint(d1, ("a", 0), 20)
    manager.alter_checkpoint_dir(("b", 1), d1, d2)
    manager.abort_cleaning(("zzz", 0), d1)
    reread = LogCleanerManager([d1, d2], logs)
    assert reread.all_cleaner_checkpoints() == {("a", 0): 20, ("b", 1): 7}
    assert OffsetCheckpointFile(d2 / CLEANER_OFFSET_CHECKPOINT).read() == {("b", 1): 7}
    reread.update_checkpoints(d1, remove=("a", 0))
    assert OffsetCheckpointFile(d1 / CLEANER_OFFSET_CHECKPOINT).read() == {}


# ---------------------------------------------------------------------------- clean_one
def test_clean_one_compacts_and_checkpoints(tmp_path: Path, clock: ManualClock,
                                            logs: Logs) -> None:
    a = logs.logs[("a", 0)] = open_log(tmp_path / "d1" / "a-0", clock)
    b = logs.logs[("b", 0)] = open_log(tmp_path / "d2" / "b-0", clock)
    fill(a, clock, 200, keys=5)
    fill(b, clock, 100, keys=5)
    cleaner = LogCleaner(SMALL, [tmp_path / "d1", tmp_path / "d2"], logs, clock=clock)
    first = cleaner.clean_one(clock.milliseconds())
    second = cleaner.clean_one(clock.milliseconds())
    assert first is not None and second is not None
    assert cleaner.clean_one(clock.milliseconds()) is None  # both clean now
    checkpoints = cleaner.manager.all_cleaner_checkpoints()
    assert checkpoints == {("a", 0): a.active_segment.base_offset,
                           ("b", 0): b.active_segment.base_offset}
    assert keys_and_values(a) == {b"key-%d" % k: b"value-%d" % (195 + k) for k in range(5)}
    # New dirty data: cleaned again from the checkpoint on.
    fill(a, clock, 300, keys=5, start=200)
    stats = cleaner.clean_one(clock.milliseconds())
    assert stats is not None and stats.first_dirty_offset == checkpoints[("a", 0)]
    # A restarted cleaner reads the checkpoints back.
    restarted = LogCleaner(SMALL, [tmp_path / "d1", tmp_path / "d2"], logs, clock=clock)
    assert restarted.manager.all_cleaner_checkpoints()[("a", 0)] == a.active_segment.base_offset


def test_disabled_cleaner_does_nothing(tmp_path: Path, clock: ManualClock, logs: Logs) -> None:
    filled_log(tmp_path, clock, logs)
    config = CleanerConfig(enable=False, dedupe_buffer_size=1 << 20)
    assert LogCleaner(config, [tmp_path / "d1"], logs, clock=clock).clean_one(T0) is None


def test_abort_during_a_round(tmp_path: Path, clock: ManualClock, logs: Logs,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    log = filled_log(tmp_path, clock, logs, 200)
    cleaner = LogCleaner(SMALL, [tmp_path / "d1"], logs, clock=clock)
    real_append = LogSegment.append
    aborted: list[bool] = []

    def append(self: LogSegment, *args: Any) -> None:
        if self.log.path.name.endswith(".cleaned") and not aborted:
            aborted.append(cleaner.abort_and_pause_cleaning(("a", 0)))  # e.g. a truncation
        real_append(self, *args)

    monkeypatch.setattr(LogSegment, "append", append)
    assert cleaner.clean_one(clock.milliseconds()) is None
    assert aborted == [True]
    assert cleaner.manager.cleaning_state(("a", 0)) == "paused"
    assert cleaner.manager.all_cleaner_checkpoints() == {}
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]
    assert cleaner.clean_one(clock.milliseconds()) is None  # paused
    cleaner.resume_cleaning(("a", 0))
    assert cleaner.clean_one(clock.milliseconds()) is not None


def test_a_failing_log_is_marked_uncleanable(tmp_path: Path, clock: ManualClock, logs: Logs,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cleaner = failing_cleaner(tmp_path, clock, logs, monkeypatch, RuntimeError("bug"))
    assert cleaner.clean_one(clock.milliseconds()) is None
    assert cleaner.manager.cleaning_state(("a", 0)) == "uncleanable"
    monkeypatch.undo()
    assert cleaner.clean_one(clock.milliseconds()) is None  # not retried
    cleaner.manager.reset_uncleanable(("a", 0))
    assert cleaner.clean_one(clock.milliseconds()) is not None


def test_disk_errors_propagate(tmp_path: Path, clock: ManualClock, logs: Logs,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    cleaner = failing_cleaner(tmp_path, clock, logs, monkeypatch, KafkaStorageError("EIO"))
    with pytest.raises(KafkaStorageError):
        cleaner.clean_one(clock.milliseconds())
    assert cleaner.manager.cleaning_state(("a", 0)) is None  # not stuck in progress


def test_each_worker_takes_its_own_cleaner(tmp_path: Path, clock: ManualClock, logs: Logs,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    a = logs.logs[("a", 0)] = open_log(tmp_path / "d1" / "a-0", clock)
    b = logs.logs[("b", 0)] = open_log(tmp_path / "d1" / "b-0", clock)
    fill(a, clock, 100, keys=5)
    fill(b, clock, 100, keys=5)
    cleaner = LogCleaner(SMALL, [tmp_path / "d1"], logs, clock=clock)  # one thread
    real_clean = Cleaner.clean
    nested: list[object] = []

    def clean(self: Cleaner, *args: Any, **kw: Any) -> Any:
        if not nested:  # a second worker calls in while this round runs
            nested.append(cleaner.clean_one(clock.milliseconds()))
        return real_clean(self, *args, **kw)

    monkeypatch.setattr(Cleaner, "clean", clean)
    assert cleaner.clean_one(clock.milliseconds()) is not None
    assert nested == [None]  # no free cleaner: the busy worker's map is not shared


def test_a_truncation_under_a_round_is_not_a_failure(tmp_path: Path, clock: ManualClock,
                                                     logs: Logs,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A truncation that was not announced with abort_and_pause_cleaning makes the round fail
    on vanished data; the partition must stay cleanable."""
    log = filled_log(tmp_path, clock, logs)
    cleaner = LogCleaner(SMALL, [tmp_path / "d1"], logs, clock=clock)

    def clean(self: Cleaner, *args: Any, **kw: Any) -> Any:
        log.truncate_to(10)
        raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(Cleaner, "clean", clean)
    assert cleaner.clean_one(clock.milliseconds()) is None
    assert cleaner.manager.cleaning_state(("a", 0)) is None


def test_os_errors_are_storage_errors(tmp_path: Path, clock: ManualClock, logs: Logs,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cleaner = failing_cleaner(tmp_path, clock, logs, monkeypatch,
                              OSError(5, "Input/output error"))
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        cleaner.clean_one(clock.milliseconds())
