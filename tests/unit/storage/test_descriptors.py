"""File descriptors a hosted partition keeps open: the mapped indexes keep none and
inactive segments open their ``.log`` only when read, so a loaded partition costs one
descriptor (its active segment's ``.log``) however many segments it has."""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

import pytest

from strata.storage.clock import ManualClock
from strata.storage.errors import KafkaStorageError
from strata.storage.log_manager import LogManager
from strata.storage.records import RecordSpec, build_batch

PARTITIONS = 20
SEGMENTS = 3


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def manager(data: Path) -> LogManager:
    lm = LogManager([data], {"log.segment.bytes": "2000", "log.index.interval.bytes": "64"},
                    ManualClock(), cluster_id="c-1", node_id=1)
    lm.startup()
    return lm


def test_a_loaded_partition_keeps_one_descriptor(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    batch = build_batch([RecordSpec(value=b"v" * 300, timestamp=1_000)])
    for p in range(PARTITIONS):
        log = lm.get_or_create_log("t", p)
        while len(log.segments) < SEGMENTS:
            log.append_as_leader(batch, leader_epoch=0)
    lm.shutdown()
    before = open_descriptors()
    lm = manager(tmp_path)
    assert open_descriptors() - before <= PARTITIONS  # one .log per partition
    log = lm.get_log("t", 0)
    assert log is not None and len(log.segments) == SEGMENTS
    assert log.read(0, 1 << 20).read_bytes()  # an old segment opens on its first read
    assert log.segments[0].log.is_open
    assert open_descriptors() - before <= PARTITIONS + 1
    offset = log.log_end_offset
    assert log.append_as_leader(batch, leader_epoch=0).first_offset == offset
    lm.shutdown()
    assert open_descriptors() <= before


def test_out_of_descriptors_fails_the_read_not_the_log_dir(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    batch = build_batch([RecordSpec(value=b"v" * 300, timestamp=1_000)])
    log = lm.get_or_create_log("t", 0)
    while len(log.segments) < SEGMENTS:
        log.append_as_leader(batch, leader_epoch=0)
    lm.shutdown()
    lm = manager(tmp_path)
    log = lm.get_log("t", 0)
    assert log is not None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hog: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 8, hard))
        with contextlib.suppress(OSError):
            while True:
                hog.append(os.open("/dev/null", os.O_RDONLY))
        with pytest.raises(KafkaStorageError) as raised:
            log.read(0, 1 << 20)  # the old segment's .log cannot be opened: EMFILE
        assert raised.value.error_code == KafkaStorageError.error_code
        assert "Too many open files" in str(raised.value)
    finally:
        for fd in hog:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not log.offline and not lm.offline_dirs
    assert log.read(0, 1 << 20).read_bytes()  # descriptors back: served again
    lm.shutdown()
