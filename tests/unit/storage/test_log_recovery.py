"""Crash recovery of a whole log: a ``.log`` cut at every byte boundary of its last batches,
flipped bytes, deleted or corrupt indexes. After recovery every fully valid batch before the
damage is readable with its original offsets, nothing after it is, and appends continue at
the right offset."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.records import RecordSpec, build_batch, iter_records

CONFIG = LogConfig.from_props({"segment.bytes": "600", "index.interval.bytes": "64"})


def make_batch(i: int) -> bytes:
    return build_batch([RecordSpec(key=b"k%d" % i, value=b"value-%d" % i * (1 + i % 3),
                                   timestamp=1_000 + i)] * (1 + i % 2))


def build_log(path: Path, n: int = 12) -> tuple[Log, list[tuple[int, int]]]:
    """A log of n batches; returns it and each batch's (first, last) offsets."""
    log = load_log(path, CONFIG, ManualClock())
    ranges = []
    for i in range(n):
        info = log.append_as_leader(make_batch(i), leader_epoch=1)
        ranges.append((info.first_offset, info.last_offset))
    log.close()  # files are complete on disk; reloading below is unclean (recovery_point 0)
    return log, ranges


def values(log: Log) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        pos, got = 0, []
        while (size := rb.peek_size(data, pos)) is not None and pos + size <= len(data):
            got.extend((r.offset, r.value) for r in iter_records(data, pos))
            pos += size
        assert got, f"no progress at offset {offset}"
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def last_segment_batches(path: Path) -> tuple[Path, list[tuple[int, rb.BatchHeader]]]:
    last = sorted(path.glob("*.log"))[-1]
    data = last.read_bytes()
    return last, list(rb.iter_headers(data))


def test_cut_at_every_byte_of_the_last_two_batches(tmp_path: Path) -> None:
    src = tmp_path / "src" / "t-0"
    _, ranges = build_log(src)
    full = values(load_log(src, CONFIG, ManualClock(), had_clean_shutdown=True))
    last_file, batches = last_segment_batches(src)
    assert len(batches) >= 2
    cut_from = batches[-2][0]
    size = last_file.stat().st_size
    for cut in range(cut_from, size):
        work = tmp_path / f"cut{cut}" / "t-0"
        shutil.copytree(src, work)
        os.truncate(work / last_file.name, cut)
        # Whole batches of the last segment that end at or before the cut survive.
        kept_last = [h for pos, h in batches if pos + h.size <= cut]
        earlier = [v for v in full if v[0] < batches[0][1].base_offset]
        expected_end = kept_last[-1].next_offset if kept_last else batches[0][1].base_offset
        log = load_log(work, CONFIG, ManualClock(), recovery_point=0)
        assert log.log_end_offset == expected_end, cut
        assert values(log) == earlier + [v for v in full if batches[0][1].base_offset <= v[0]
                                         < expected_end]
        info = log.append_as_leader(make_batch(99), leader_epoch=2)
        assert info.first_offset == expected_end
        log.close()
        shutil.rmtree(work.parent)
    assert ranges[-1][1] + 1 == full[-1][0] + 1


def test_flipped_byte_truncates_at_the_damaged_batch(tmp_path: Path) -> None:
    src = tmp_path / "src" / "t-0"
    build_log(src)
    full = values(load_log(src, CONFIG, ManualClock(), had_clean_shutdown=True))
    rng = random.Random(7)
    segments = sorted(src.glob("*.log"))
    for trial in range(25):
        work = tmp_path / f"flip{trial}" / "t-0"
        shutil.copytree(src, work)
        seg = rng.choice(segments)
        data = bytearray((work / seg.name).read_bytes())
        headers = list(rb.iter_headers(bytes(data)))
        pos, header = rng.choice(headers)
        # Flip a byte the CRC or the framing covers (not baseOffset/epoch, which it doesn't).
        at = rng.choice([pos + 8, pos + 16]) if trial % 5 == 0 else \
            rng.randrange(pos + rb.ATTRIBUTES_OFFSET, pos + header.size)
        data[at] ^= 0xFF
        (work / seg.name).write_bytes(bytes(data))
        log = load_log(work, CONFIG, ManualClock(), recovery_point=0)
        assert log.log_end_offset <= header.base_offset
        assert values(log) == [v for v in full if v[0] < log.log_end_offset]
        # Nothing from the damaged batch onwards is served.
        assert all(v[0] < header.base_offset for v in values(log))
        log.close()


def test_clean_shutdown_skips_scan_but_rebuilds_corrupt_indexes(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    build_log(path)
    full = values(load_log(path, CONFIG, ManualClock(), had_clean_shutdown=True))
    for index in path.glob("*.index"):
        index.write_bytes(b"\xff" * 24)  # garbage entries
    for tindex in list(path.glob("*.timeindex"))[:1]:
        tindex.unlink()
    log = load_log(path, CONFIG, ManualClock(), had_clean_shutdown=True)
    assert values(log) == full
    found = log.fetch_offset_by_timestamp(1_005)
    assert found is not None and found.offset > 0


@pytest.mark.parametrize("damage", ["delete", "truncate", "zero"])
def test_unclean_restart_rebuilds_indexes(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "t-0"
    build_log(path)
    full = values(load_log(path, CONFIG, ManualClock(), had_clean_shutdown=True))
    for index in path.glob("*.index"):
        if damage == "delete":
            index.unlink()
        elif damage == "truncate":
            os.truncate(index, 3)
        else:
            index.write_bytes(bytes(4096))
    log = load_log(path, CONFIG, ManualClock(), recovery_point=0)
    assert values(log) == full
    for first, _ in [(o, None) for o, _ in full[::3]]:
        assert log.read(first, 1 << 20).size > 0
