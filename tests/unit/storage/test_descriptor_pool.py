"""The pool of inactive segments' descriptors: a bounded LRU whatever the partitions and
segments, reopened files read the same bytes by their current path, an eviction (or a
deletion) never closes a descriptor a ``FileSlice`` still sends from, and deleted segments
leave the pool. Real files in a temp dir, counted in ``/proc/self/fd``."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.storage.cleaner import Cleaner
from strata.storage.clock import ManualClock
from strata.storage.descriptor_pool import DESCRIPTOR_POOL, DescriptorPool
from strata.storage.file_records import FileRecords, FileSlice
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_file_names import DELETED_FILE_SUFFIX
from strata.storage.log_loader import load_log
from strata.storage.log_manager import LogManager
from strata.storage.offset_map import OffsetMap
from strata.storage.records import RecordSpec, build_batch, iter_records

POOL = 8
PARTITIONS = 12
SEGMENTS = 5
T0 = 1_700_000_000_000
SMALL_SEGMENTS = {"segment.bytes": "2000", "index.interval.bytes": "64"}


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def batch(value: bytes, key: bytes | None = None) -> bytes:
    return build_batch([RecordSpec(key=key, value=value, timestamp=T0)])


@pytest.fixture
def pool() -> Iterator[DescriptorPool]:
    """The process's pool, bounded at ``POOL`` and emptied for the test (restored after)."""
    before = DESCRIPTOR_POOL.max_open
    DESCRIPTOR_POOL.evict_all()
    DESCRIPTOR_POOL.resize(POOL)
    yield DESCRIPTOR_POOL
    DESCRIPTOR_POOL.resize(before)
    DESCRIPTOR_POOL.evict_all()


def open_log(path: Path, overrides: dict[str, str] | None = None) -> Log:
    config = LogConfig.from_props({**SMALL_SEGMENTS, **(overrides or {})})
    return load_log(path, config, ManualClock(T0))


def fill(log: Log, segments: int, key: bytes | None = None) -> None:
    i = 0
    while len(log.segments) < segments:
        log.append_as_leader(batch(b"v%05d" % i + b"." * 300, key), leader_epoch=0)
        i += 1
    log.update_high_watermark(log.log_end_offset)


def segment_bytes(log: Log, index: int) -> bytes:
    segment = log.segments[index]
    return segment.log.path.read_bytes()[: segment.size]


def sendfile_all(piece: FileSlice) -> bytes:
    """The slice's bytes as a connection sends them: ``os.sendfile`` into a socket."""
    out, peer = socket.socketpair()
    try:
        position, remaining = piece.position, piece.length
        while remaining:
            sent = os.sendfile(out.fileno(), piece.fd, position, remaining)
            assert sent > 0
            position, remaining = position + sent, remaining - sent
        out.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := peer.recv(1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        out.close()
        peer.close()


def test_the_pool_stays_bounded_with_many_partitions_and_segments(
        tmp_path: Path, pool: DescriptorPool) -> None:
    props = {"log.segment.bytes": "2000", "log.index.interval.bytes": "64"}
    before = open_descriptors()
    lm = LogManager([tmp_path], props, ManualClock(T0), cluster_id="c-1", node_id=1)
    lm.startup()
    for p in range(PARTITIONS):  # every roll hands a descriptor to the pool
        fill(lm.get_or_create_log("t", p), SEGMENTS)
    assert len(pool) == POOL
    assert open_descriptors() - before <= PARTITIONS + POOL
    lm.shutdown()
    assert open_descriptors() <= before

    lm = LogManager([tmp_path], props, ManualClock(T0), cluster_id="c-1", node_id=1)
    lm.startup()
    assert open_descriptors() - before <= PARTITIONS  # one .log per partition at rest
    evicted = pool.evicted
    for p in range(PARTITIONS):  # read every batch of every segment
        log = lm.get_log("t", p)
        assert log is not None and len(log.segments) == SEGMENTS
        offset = 0
        while offset < log.log_end_offset:
            records = list(iter_records(log.read(offset, 100).read_bytes()))
            assert records and records[0].offset == offset
            offset = records[-1].offset + 1
        assert open_descriptors() - before <= PARTITIONS + POOL
    assert len(pool) == POOL
    assert pool.evicted - evicted >= PARTITIONS * (SEGMENTS - 1) - POOL
    lm.shutdown()
    assert open_descriptors() <= before


def test_a_reopened_segment_reads_the_same_bytes(tmp_path: Path, pool: DescriptorPool) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 3 * POOL)
    first = [log.read(s.base_offset, 1 << 20).read_bytes() for s in log.segments]
    assert first == [segment_bytes(log, i) for i in range(len(log.segments))]
    assert not log.segments[0].log.is_open  # the least recently used went first
    opened = pool.opened
    for _ in range(2):  # every inactive segment opened again, some several times
        again = [log.read(s.base_offset, 1 << 20).read_bytes() for s in log.segments]
        assert again == first
    assert pool.opened - opened >= 2 * (len(log.segments) - 1 - POOL)
    assert log.active_segment.log.is_active  # never pooled
    log.close()


def test_eviction_never_closes_the_descriptor_under_an_outstanding_slice(
        tmp_path: Path, pool: DescriptorPool) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, POOL + 4)
    expected = segment_bytes(log, 0)
    piece = log.read(0, 1 << 20).slices[0]
    assert piece.length == len(expected)
    inode = os.fstat(piece.fd).st_ino
    pool.evict_all()  # the pool lets go of segment 0 ...
    for segment in log.segments[1:-1]:  # ... and fills up with the others
        assert log.read(segment.base_offset, 1 << 20).read_bytes()
    assert not log.segments[0].log.is_open
    assert len(pool) == POOL - 1 and pool.live == POOL  # the slice's counts against the bound
    # Files opened now would take the slice's fd number had it been closed.
    others = [os.open(tmp_path / f"other-{i}", os.O_CREAT | os.O_RDWR) for i in range(16)]
    try:
        for fd in others:
            os.write(fd, b"X" * len(expected))
        assert piece.fd not in others
        assert os.fstat(piece.fd).st_ino == inode
        assert sendfile_all(piece) == expected  # what a client would be sent
    finally:
        for fd in others:
            os.close(fd)
    held = open_descriptors()
    del piece  # the last holder: now it closes
    assert open_descriptors() == held - 1
    log.close()


def test_slices_holding_every_descriptor_keep_the_bound(tmp_path: Path,
                                                        pool: DescriptorPool) -> None:
    """One response reading every old segment of many (a Fetch of thousands of partitions
    catching up): slices hold at most ``max_open`` descriptors; the reads beyond go through a
    transient descriptor and their slices carry the bytes."""
    log = open_log(tmp_path / "t-0")
    fill(log, 4 * POOL)
    pool.evict_all()
    before = open_descriptors()
    inactive = log.segments[:-1]
    pieces = [log.read(s.base_offset, 1 << 20).slices[0] for s in inactive]
    assert open_descriptors() - before <= POOL  # not one per slice
    assert pool.live == POOL and pool.transient >= len(inactive) - POOL
    assert [p.descriptor is not None for p in pieces] == \
        [i < POOL for i in range(len(inactive))]
    assert all(p.data is not None for p in pieces[POOL:])
    assert [p.read_bytes() for p in pieces] == \
        [segment_bytes(log, i) for i in range(len(inactive))]
    assert [sendfile_all(p) for p in pieces[:POOL]] == \
        [segment_bytes(log, i) for i in range(POOL)]
    del pieces
    assert pool.live == len(pool) <= POOL  # what only the slices held closed with them
    assert log.read(0, 1 << 20).slices[0].descriptor is not None  # room again
    log.close()


def test_a_deleted_segment_releases_its_descriptor(tmp_path: Path,
                                                   pool: DescriptorPool) -> None:
    log = open_log(tmp_path / "t-0", {"file.delete.delay.ms": "0"})
    fill(log, 3)
    oldest = log.segments[0]
    expected = segment_bytes(log, 0)
    piece = log.read(0, 1 << 20).slices[0]  # a response still on its way
    assert pool.holds(oldest.log)
    before = open_descriptors()
    log.delete_records_before(log.segments[2].base_offset)  # DeleteRecords: 2 segments go
    assert log.delete_pending_segments() == 2
    assert not oldest.log.path.exists() and not oldest.log.is_open
    assert not pool.holds(oldest.log) and len(pool) == 0
    assert open_descriptors() == before - 1  # the other deleted segment's, at once
    assert sendfile_all(piece) == expected  # the slice keeps its own until it is sent
    del piece
    assert open_descriptors() == before - 2
    with pytest.raises(ValueError, match="closed"):
        oldest.log.read(0, 10)  # a deleted file is never reopened
    log.close()


def test_a_reopen_uses_the_segments_current_path(tmp_path: Path, pool: DescriptorPool) -> None:
    """Renamed while evicted (``.deleted``, then a cleaner's ``.cleaned``/``.swap``
    suffixes): the next read opens the file under its new name."""
    log = open_log(tmp_path / "t-0")
    fill(log, 3)
    segment = log.segments[0]
    expected = segment_bytes(log, 0)
    for old, new in (("", DELETED_FILE_SUFFIX), (DELETED_FILE_SUFFIX, ".cleaned"),
                     (".cleaned", ".swap"), (".swap", "")):
        pool.evict_all()
        segment.change_file_suffixes(old, new)
        assert segment.log.path.name.endswith(".log" + new)
        assert segment.read(0, 1 << 20) is not None
        assert segment.log.read(0, 1 << 20) == expected
    log.close()


def test_compaction_with_a_pool_of_one(tmp_path: Path, pool: DescriptorPool) -> None:
    """The cleaner (scan, offset map, rewrite, swap) reads through a pool that evicts at
    every other segment it touches, and the log it leaves reads right."""
    pool.resize(1)
    log = open_log(tmp_path / "t-0", {"cleanup.policy": "compact"})
    for i in range(60):
        log.append_as_leader(batch(b"value-%d" % i + b"." * 100, b"key-%d" % (i % 3)), 0)
    log.update_high_watermark(log.log_end_offset)
    active = log.active_segment.base_offset
    assert len(log.segments) > 4
    stats = Cleaner(OffsetMap(1 << 20), clock=ManualClock(T0)).clean(log, 0, active, T0)
    assert stats.end_offset == active and stats.records_removed > 0
    assert len(pool) <= 1
    kept = [r for s in log.segments[:-1] for position, header in s.batches()
            for r in iter_records(s.log.read(position, header.size))]
    latest = sorted({i % 3: i for i in range(active)}.values())
    assert [(r.offset, r.value) for r in kept] == [(i, b"value-%d" % i + b"." * 100)
                                                   for i in latest]
    log.close()


def test_flush_and_truncation_after_eviction(tmp_path: Path, pool: DescriptorPool) -> None:
    """A rolled segment evicted before the flusher reaches it is fsynced through a reopen; a
    truncation that makes an older segment the last one makes it active again."""
    log = open_log(tmp_path / "t-0")
    fill(log, 3)
    pool.evict_all()
    log.flush()
    assert log.recovery_point == log.log_end_offset
    assert len(pool) == 2  # the two rolled segments, reopened for their fsync
    second = log.segments[1]
    assert log.truncate_to(second.base_offset + 1)
    assert log.active_segment is second and not second.log.is_active
    pool.evict_all()
    offset = log.log_end_offset
    assert log.append_as_leader(batch(b"after"), 0).first_offset == offset
    assert second.log.is_active and not pool.holds(second.log)
    assert [r.value for r in iter_records(log.read(offset, 1 << 20).read_bytes())] == \
        [b"after"]
    log.close()


def test_file_records_close_keeps_a_slice_readable(tmp_path: Path,
                                                   pool: DescriptorPool) -> None:
    """An active file closed (a log closing, a truncation dropping it) under a slice: the
    slice reads the bytes it was given until it is dropped."""
    records = FileRecords.open(tmp_path / "00000000000000000000.log")
    records.append(b"0123456789")
    piece = records.slice(2, 5)
    records.close()
    assert not records.is_open
    assert piece.read_bytes() == b"23456"
    assert sendfile_all(piece) == b"23456"
