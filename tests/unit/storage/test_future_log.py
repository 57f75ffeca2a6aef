"""Moving a partition between log dirs: the mover's pure step rule (``future_log.next_step``),
and the LogManager's future log, swap and restart handling with real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.errors import KafkaStorageError, LogDirOfflineError
from strata.storage.future_log import (
    Action,
    Positions,
    Step,
    copy_batches,
    next_step,
    positions,
    promote,
)
from strata.storage.log import Log
from strata.storage.log_manager import LogDirNotFoundError, LogManager
from strata.storage.records import RecordSpec, build_batch, iter_records


def batch(*values: bytes, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    return build_batch([RecordSpec(key=b"k", value=v, timestamp=1_700_000_000_000)
                        for v in values], producer_id=producer_id, producer_epoch=0,
                       base_sequence=base_sequence)


def manager(tmp_path: Path, clock: ManualClock, **config: str) -> LogManager:
    lm = LogManager([tmp_path / "a", tmp_path / "b"],
                    {k.replace("_", "."): v for k, v in config.items()}, clock,
                    cluster_id="c-1", node_id=1)
    lm.startup()
    return lm


def read_values(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from the log start (uncompressed test batches). A read
    may end inside a batch, as Kafka's: that batch is read whole by the next one."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = rb.whole_batches(log.read(offset, 1 << 20).read_bytes())
        pos = 0
        while pos < len(data):
            out += [(r.offset, r.value or b"") for r in iter_records(data, pos)
                    if r.offset >= log.log_start_offset]
            header = rb.parse_header(data, pos)
            pos += header.size
            offset = header.last_offset + 1
    return out


def follow(lm: LogManager, topic: str, current: Log, future: Log) -> None:
    """What the broker's mover does, synchronously: step until the swap is due."""
    while (step := next_step(positions(current, future))).action is not Action.SWAP:
        if step.action is Action.COPY:
            copy_batches(future, current.read(step.offset, 100))
        elif step.action is Action.TRUNCATE:
            future.truncate_to(step.offset)
        else:
            future.truncate_fully_and_start_at(step.offset)


# ------------------------------------------------------------------- next_step (pure)
@pytest.mark.parametrize(("p", "expected"), [
    (Positions(0, 10, 0, 0), Step(Action.COPY, 0)),
    (Positions(0, 10, 0, 4, (0, 10)), Step(Action.COPY, 4)),
    (Positions(0, 10, 0, 10, (0, 10)), Step(Action.SWAP, 10)),
    (Positions(0, 0, 0, 0), Step(Action.SWAP, 0)),
    # retention or DeleteRecords moved the current start past the copy: restart there
    (Positions(7, 10, 0, 5, (0, 10)), Step(Action.RESTART, 7)),
    (Positions(3, 10, 0, 0), Step(Action.RESTART, 3)),
    # the current log was truncated below the copy (a follower diverged)
    (Positions(0, 6, 0, 9, (1, 6)), Step(Action.TRUNCATE, 6)),
    # the future's epoch 2 ends at 4 in the current log, which went on in epoch 3
    (Positions(0, 12, 0, 8, (2, 4)), Step(Action.TRUNCATE, 4)),
    # the current log knows no epoch at or below the future's: copy again from its start
    (Positions(0, 12, 0, 8, (-1, -1)), Step(Action.RESTART, 0)),
    (Positions(5, 12, 5, 8, (0, 2)), Step(Action.RESTART, 5)),
    # a future without epochs that is longer than the current log
    (Positions(0, 3, 0, 8), Step(Action.TRUNCATE, 3)),
])
def test_next_step(p: Positions, expected: Step) -> None:
    assert next_step(p) == expected


# --------------------------------------------------------------- LogManager, real files
def test_log_dir_for_path_names_only_log_dirs(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock())
    assert lm.log_dir_for_path(str((tmp_path / "b").resolve())) == tmp_path / "b"
    for bad in ("", "b", str(tmp_path / "c"), str(tmp_path)):
        with pytest.raises(LogDirNotFoundError) as info:
            lm.log_dir_for_path(bad)
        assert info.value.error_code == 57
    lm.offline_dirs.add(tmp_path / "b")
    with pytest.raises(LogDirOfflineError):
        lm.log_dir_for_path(str(tmp_path / "b"))


def test_a_move_keeps_offsets_epochs_producers_and_checkpoints(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager(tmp_path, clock, log_segment_bytes="300", log_segment_delete_delay_ms="1000")
    current = lm.get_or_create_log("t", 0)
    source_dir = current.dir
    target = tmp_path / "b" if source_dir.parent == tmp_path / "a" else tmp_path / "a"
    for n in range(12):
        epoch = (0, 1, 3)[n // 4]
        current.append_as_leader(batch(b"e%d-%d" % (epoch, n), producer_id=7,
                                       base_sequence=n), leader_epoch=epoch)
    current.update_high_watermark(9)
    current.delete_records_before(2)
    (source_dir / "partition.metadata").write_text("version: 0\ntopic_id: x\n")
    future = lm.create_future_log("t", 0, target)
    assert future is not None and future.dir.name.endswith(names.FUTURE_DIR_SUFFIX)
    assert lm.create_future_log("t", 0, target) is None  # already moving there
    follow(lm, "t", current, future)
    current.append_as_leader(batch(b"late", producer_id=7, base_sequence=12), leader_epoch=3)
    follow(lm, "t", current, future)  # catches up with appends that kept arriving
    expected = read_values(current)
    new = lm.replace_current_with_future_log("t", 0)
    assert read_values(current) == expected  # a reader holding the old log reads on

    assert new.dir == target / "t-0" and lm.get_log("t", 0) is new
    assert (new.dir / "partition.metadata").read_text() == "version: 0\ntopic_id: x\n"
    assert lm.future_log("t", 0) is None
    assert read_values(new) == expected and expected[0][0] == 2
    assert (new.log_start_offset, new.high_watermark, new.log_end_offset) == (2, 9, 13)
    assert [(e.epoch, e.start_offset) for e in new.leader_epoch_cache.epoch_entries()] == \
        [(0, 2), (1, 4), (3, 8)]
    entry = new.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 12
    assert not source_dir.exists()
    (doomed,) = [d for d in source_dir.parent.iterdir() if d.name.startswith("t-0.")]
    assert doomed.name.endswith(names.DELETE_DIR_SUFFIX)
    # appends go to the new log; a duplicate of the producer's last batch is recognised
    new.append_as_leader(batch(b"after"), leader_epoch=3)
    dup = new.append_as_leader(batch(b"late", producer_id=7, base_sequence=12), leader_epoch=3)
    assert dup.duplicate and dup.first_offset == 12
    lm.cleanup_logs()
    assert doomed.exists()  # file.delete.delay.ms has not passed
    clock.advance(1000)
    lm.cleanup_logs()
    assert not doomed.exists()

    lm.shutdown()
    again = manager(tmp_path, clock, log_segment_bytes="300")
    reloaded = again.get_log("t", 0)
    assert reloaded is not None and reloaded.dir == target / "t-0"
    assert read_values(reloaded) == [*expected, (13, b"after")]
    assert (reloaded.log_start_offset, reloaded.high_watermark) == (2, 9)


def test_current_truncation_and_retention_during_a_move(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock())
    current = lm.get_or_create_log("t", 0)
    target = tmp_path / "b" if current.dir.parent == tmp_path / "a" else tmp_path / "a"
    for i in range(6):
        current.append_as_leader(batch(b"v%d" % i), leader_epoch=0)
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    follow(lm, "t", current, future)
    current.truncate_to(4)  # a follower diverged; the leader's log goes on in epoch 1
    current.append_as_follower(_with_epoch(current, [b"x", b"y"], 1))
    assert next_step(positions(current, future)) == Step(Action.TRUNCATE, 4)
    follow(lm, "t", current, future)
    assert read_values(future) == read_values(current)
    current.update_high_watermark(current.log_end_offset)
    current.delete_records_before(6)
    current.append_as_leader(batch(b"z"), leader_epoch=1)
    follow(lm, "t", current, future)
    new = lm.replace_current_with_future_log("t", 0)
    assert read_values(new) == [(6, b"z")] and new.log_start_offset == 6


def _with_epoch(log: Log, values: list[bytes], epoch: int) -> bytes:
    """A batch as a leader of ``epoch`` sent it, starting at ``log``'s end."""
    return build_batch([RecordSpec(key=b"k", value=v, timestamp=1_700_000_000_000)
                        for v in values], base_offset=log.log_end_offset,
                       partition_leader_epoch=epoch)


def test_a_new_move_replaces_the_older_one_and_delete_removes_both(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "a", tmp_path / "b", tmp_path / "c"], {}, ManualClock(),
                    cluster_id="c-1", node_id=1)
    lm.startup()
    current = lm.get_or_create_log("t", 0)
    others = [d for d in lm.log_dirs if d != current.dir.parent]
    first = lm.create_future_log("t", 0, others[0])
    assert first is not None
    second = lm.create_future_log("t", 0, others[1])
    assert second is not None and lm.future_log("t", 0) is second
    assert not first.dir.exists()
    assert lm.create_future_log("t", 0, current.dir.parent) is None  # back home: no move
    assert lm.future_log("t", 0) is None and not second.dir.exists()
    third = lm.create_future_log("t", 0, others[0])
    assert third is not None
    lm.delete_log("t", 0)
    assert not third.dir.exists() and lm.future_log("t", 0) is None


def test_no_move_while_a_log_dir_is_offline(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "a", tmp_path / "b", tmp_path / "c"], {}, ManualClock(),
                    cluster_id="c-1", node_id=1)
    lm.startup()
    current = lm.get_or_create_log("t", 0)
    others = [d for d in lm.log_dirs if d != current.dir.parent]
    lm.offline_dirs.add(others[1])
    with pytest.raises(KafkaStorageError):
        lm.create_future_log("t", 0, others[0])


def test_a_preferred_dir_is_where_the_partition_is_created(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock())
    lm.maybe_update_preferred_log_dir("t", 0, tmp_path / "b")
    lm.maybe_update_preferred_log_dir("t", 1, tmp_path / "b")
    assert lm.get_or_create_log("t", 0).dir.parent == tmp_path / "b"
    assert lm.get_or_create_log("t", 1).dir.parent == tmp_path / "b"


def test_restart_discards_an_unfinished_move(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager(tmp_path, clock)
    current = lm.get_or_create_log("t", 0)
    target = tmp_path / "b" if current.dir.parent == tmp_path / "a" else tmp_path / "a"
    current.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    follow(lm, "t", current, future)
    future_dir = future.dir
    lm.shutdown()
    assert future_dir.exists()
    again = manager(tmp_path, clock)
    log = again.get_log("t", 0)
    assert log is not None and log.dir == current.dir and log.log_end_offset == 2
    assert not future_dir.exists() and again.future_log("t", 0) is None
    assert again.interrupted_moves == {("t", 0): target}  # the broker starts it again


def test_restart_after_a_swap_cut_between_its_renames_keeps_the_future(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager(tmp_path, clock)
    current = lm.get_or_create_log("t", 0)
    target = tmp_path / "b" if current.dir.parent == tmp_path / "a" else tmp_path / "a"
    current.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    current.update_high_watermark(3)
    lm.checkpoint_all()
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    follow(lm, "t", current, future)
    future_dir = future.dir
    # The crash: the current dir already renamed -delete, the future not yet renamed.
    renamed: list[Path] = []
    original = Path.rename

    def rename_once(self: Path, target_path: Path) -> Path:
        if renamed:
            raise OSError("power cut")
        renamed.append(self)
        return original(self, target_path)

    def never(path: Path) -> Log:
        raise AssertionError("not reached")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "rename", rename_once)
        with pytest.raises(OSError, match="power cut"):
            promote(current, future, never)
    assert future_dir.exists() and not (current.dir).exists()
    again = manager(tmp_path, clock)
    log = again.get_log("t", 0)
    assert log is not None and log.dir == target / "t-0"
    assert read_values(log) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log.high_watermark == 3


def test_no_swap_once_shutdown_began(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock())
    current = lm.get_or_create_log("t", 0)
    target = tmp_path / "b" if current.dir.parent == tmp_path / "a" else tmp_path / "a"
    current.append_as_leader(batch(b"a"), leader_epoch=0)
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    follow(lm, "t", current, future)
    lm.shutting_down = True  # what ``shutdown`` sets first, under the swap lock
    with pytest.raises(LogDirOfflineError):
        lm.replace_current_with_future_log("t", 0)
    assert lm.get_log("t", 0) is current and current.dir.exists() and future.dir.exists()


def test_future_dir_names() -> None:
    name = names.log_future_dir_name("my-topic", 3, "0a1b")
    assert name == "my-topic-3.0a1b-future"
    assert names.parse_topic_partition_name(name) == ("my-topic", 3)
    with pytest.raises(ValueError):
        names.parse_topic_partition_name("my-topic-3-future")


def test_the_swapped_out_log_stays_readable_with_lazily_opened_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager(tmp_path, clock, log_segment_bytes="300")
    log = lm.get_or_create_log("t", 0)
    for i in range(12):
        log.append_as_leader(batch(b"v%d" % i), leader_epoch=0)
    lm.shutdown()
    lm = manager(tmp_path, clock, log_segment_bytes="300")  # inactive segments open lazily
    current = lm.get_log("t", 0)
    assert current is not None and len(current.segments) > 2
    target = tmp_path / "b" if current.dir.parent == tmp_path / "a" else tmp_path / "a"
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    follow(lm, "t", current, future)
    lm.replace_current_with_future_log("t", 0)
    assert [v for _, v in read_values(current)] == [b"v%d" % i for i in range(12)]
    assert all(file.path.exists() and file.path.parent == current.dir  # the -delete dir
               for s in current.segments for file in (s.log, s.offset_index, s.time_index))


def test_read_values_reads_on_past_a_read_that_ends_inside_a_batch(tmp_path: Path) -> None:
    """``Log.read`` may end inside a batch (as Kafka's): ``read_values`` leaves that partial
    batch for its next read. test_alter_replica_log_dirs failed on it once its log passed
    1 MiB ("record batch truncated: 39 bytes < header 61")."""
    log = manager(tmp_path, ManualClock()).get_or_create_log("t", 0)
    values = [b"%04d" % i + b"x" * 1000 for i in range(1100)]
    for value in values:
        log.append_as_leader(batch(value), leader_epoch=0)
    first = log.read(0, 1 << 20).read_bytes()
    assert len(first) == 1 << 20 and len(rb.whole_batches(first)) < len(first)
    assert read_values(log) == list(enumerate(values))
