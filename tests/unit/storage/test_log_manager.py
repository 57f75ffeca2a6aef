"""LogManager: loading, clean-shutdown marker, checkpoints, dir choice, deletion, offline dirs,
flush and retention ticks."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.clock import ManualClock
from strata.storage.errors import KafkaStorageError, LogDirOfflineError
from strata.storage.log import Log
from strata.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LogManager,
)
from strata.storage.meta_properties import InconsistentClusterIdError, read_meta_properties
from strata.storage.records import RecordSpec, build_batch


def batch(value: bytes, ts: int = 1_700_000_000_000) -> bytes:
    return build_batch([RecordSpec(key=b"k", value=value, timestamp=ts)])


def log_with(lm: LogManager, topic: str, values: list[bytes]) -> Log:
    """Partition 0 of ``topic``, got or created, with one batch per value appended as leader."""
    log = lm.get_or_create_log(topic, 0)
    for value in values:
        log.append_as_leader(batch(value), leader_epoch=0)
    return log


def manager(dirs: list[Path], clock: ManualClock, **config: str) -> LogManager:
    lm = LogManager(dirs, {k.replace("_", "."): v for k, v in config.items()}, clock,
                    cluster_id="c-1", node_id=1)
    lm.startup()
    return lm


def test_startup_writes_meta_properties_and_refuses_another_cluster(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d1"], ManualClock())
    meta = read_meta_properties(tmp_path / "d1")
    assert meta is not None and meta.cluster_id == "c-1" and meta.node_id == 1
    lm.shutdown()
    other = LogManager([tmp_path / "d1"], {}, ManualClock(), cluster_id="c-2", node_id=1)
    with pytest.raises(InconsistentClusterIdError):
        other.startup()


def test_clean_shutdown_round_trip(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock)
    log = log_with(lm, "orders", [b"v%d" % i for i in range(5)])
    assert lm.get_or_create_log("orders", 0) is log
    lm.shutdown()
    assert (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()
    rp = OffsetCheckpointFile(tmp_path / "d" / RECOVERY_POINT_CHECKPOINT).read()
    assert rp == {("orders", 0): 5}
    lm2 = manager([tmp_path / "d"], clock)
    assert lm2.had_clean_shutdown[tmp_path / "d"]
    assert not (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()  # a crash now is unclean
    log2 = lm2.get_log("orders", 0)
    assert log2 is not None and log2.log_end_offset == 5
    lm2.shutdown()


def test_unclean_restart_recovers(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock)
    log_with(lm, "t", [b"x%d" % i for i in range(3)])
    # No shutdown: the process "died". The bytes reached the OS, so nothing is lost.
    lm2 = manager([tmp_path / "d"], clock)
    assert not lm2.had_clean_shutdown[tmp_path / "d"]
    log2 = lm2.get_log("t", 0)
    assert log2 is not None and log2.log_end_offset == 3
    lm2.shutdown()


def test_new_logs_go_to_the_emptiest_dir_and_load_from_all(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs, ManualClock())
    logs = [lm.get_or_create_log("t", p) for p in range(4)]
    assert sorted(sum(1 for log in logs if log.dir.parent == d) for d in dirs) == [2, 2]
    lm.shutdown()
    lm2 = manager(dirs, ManualClock())
    assert sorted(lm2.all_logs()) == [("t", p) for p in range(4)]
    lm2.shutdown()


def test_topic_config_overrides_apply_to_existing_logs(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"], ManualClock(), log_segment_bytes="100000")
    log = lm.get_or_create_log("t", 0)
    assert log.config.segment_bytes == 100000
    lm.set_topic_config("t", {"segment.bytes": "5000"})
    assert log.config.segment_bytes == 5000
    lm.shutdown()


def test_delete_log_removes_the_dir(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"], ManualClock())
    log = lm.get_or_create_log("gone", 3)
    path = log.dir
    assert lm.delete_log("gone", 3)
    assert not path.exists() and lm.get_log("gone", 3) is None
    assert not lm.delete_log("gone", 3)
    assert not [p for p in (tmp_path / "d").iterdir() if p.is_dir()]
    lm.shutdown()


def test_flush_dirty_logs_by_flush_messages(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"], ManualClock(), log_flush_interval_messages="2")
    log = lm.get_or_create_log("t", 0)
    log.append_as_leader(batch(b"1"), leader_epoch=0)
    assert lm.flush_dirty_logs() == 0
    log.append_as_leader(batch(b"2"), leader_epoch=0)
    assert lm.flush_dirty_logs() == 1 and log.recovery_point == 2
    lm.shutdown()


def test_cleanup_logs_applies_retention(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock, log_segment_bytes="200", log_retention_ms="1000",
                 log_segment_delete_delay_ms="0")
    log = lm.get_or_create_log("t", 0)
    for i in range(10):
        log.append_as_leader(batch(b"old%d" % i, ts=clock.milliseconds()), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10_000)
    assert lm.cleanup_logs() > 0
    assert log.log_start_offset > 0
    assert not list(log.dir.glob("*.deleted"))
    lm.shutdown()


def test_disk_error_takes_only_that_dir_offline(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs, ManualClock())
    la, lb = lm.get_or_create_log("t", 0), lm.get_or_create_log("t", 1)
    assert la.dir.parent != lb.dir.parent
    real_write, real_writev = os.write, os.writev
    bad_fd = la.active_segment.log.fd

    def failing_write(fd: int, data: bytes) -> int:
        if fd == bad_fd:
            raise OSError(errno.EIO, "Input/output error")
        return real_write(fd, data)

    def failing_writev(fd: int, buffers: list[bytes]) -> int:
        if fd == bad_fd:
            raise OSError(errno.EIO, "Input/output error")
        return real_writev(fd, buffers)

    monkeypatch.setattr(os, "write", failing_write)
    monkeypatch.setattr(os, "writev", failing_writev)
    with pytest.raises(KafkaStorageError):
        la.append_as_leader(batch(b"x"), leader_epoch=0)
    assert lm.offline_dirs == {la.dir.parent}
    with pytest.raises(LogDirOfflineError):
        la.read(0, 100)
    lb.append_as_leader(batch(b"fine"), leader_epoch=0)  # the other dir keeps serving
    monkeypatch.setattr(os, "write", real_write)
    monkeypatch.setattr(os, "writev", real_writev)
    assert lm.get_or_create_log("t", 2).dir.parent == lb.dir.parent
    lm.shutdown()
    assert not (la.dir.parent / CLEAN_SHUTDOWN_FILE).exists()
    assert (lb.dir.parent / CLEAN_SHUTDOWN_FILE).exists()


def test_idle_producers_expire_after_producer_id_expiration_ms(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock, producer_id_expiration_ms="1000")
    log = lm.get_or_create_log("t", 0)
    idem = build_batch([RecordSpec(value=b"x", timestamp=clock.milliseconds())],
                       producer_id=5, producer_epoch=0, base_sequence=0)
    log.append_as_leader(idem, leader_epoch=0)
    assert lm.remove_expired_producers() == 0
    clock.advance(1001)
    assert lm.remove_expired_producers() == 1
    assert log.producer_state.last_entry(5) is None
    lm.shutdown()


def test_high_watermark_comes_back_from_its_checkpoint_never_from_the_log_end(
        tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock)
    log = log_with(lm, "orders", [b"v%d" % i for i in range(5)])
    log.maybe_increment_high_watermark(3)  # 3 and 4 are not replicated yet
    lm.checkpoint_high_watermarks()
    assert OffsetCheckpointFile(tmp_path / "d" / REPLICATION_OFFSET_CHECKPOINT).read() == {
        ("orders", 0): 3}
    # A crash: the unreplicated tail is in the log, but not committed.
    crashed = manager([tmp_path / "d"], clock)
    restored = crashed.get_log("orders", 0)
    assert restored is not None
    assert (restored.log_end_offset, restored.high_watermark) == (5, 3)
    crashed.shutdown()  # a clean shutdown writes the HW too, and it is still 3
    clean = manager([tmp_path / "d"], clock)
    again = clean.get_log("orders", 0)
    assert again is not None and (again.log_end_offset, again.high_watermark) == (5, 3)
    clean.shutdown()


def test_without_a_high_watermark_checkpoint_the_log_start_is_the_high_watermark(
        tmp_path: Path) -> None:
    clock = ManualClock()
    lm = manager([tmp_path / "d"], clock)
    log = log_with(lm, "t", [b"x%d" % i for i in range(3)])
    log.maybe_increment_high_watermark(3)
    lm.shutdown()
    (tmp_path / "d" / REPLICATION_OFFSET_CHECKPOINT).unlink()
    lm2 = manager([tmp_path / "d"], clock)
    log2 = lm2.get_log("t", 0)
    assert log2 is not None and (log2.log_end_offset, log2.high_watermark) == (3, 0)
    lm2.shutdown()
