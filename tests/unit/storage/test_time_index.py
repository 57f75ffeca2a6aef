"""TimeIndex (.timeindex): append only on a newer timestamp, lookup, truncation, the reserved
last slot, and the sanity check."""

import shutil
import struct
from pathlib import Path

import pytest

from strata.storage.abstract_index import CorruptIndexError, InvalidOffsetError
from strata.storage.time_index import TimeIndex, TimestampOffset

BASE = 500


def make(tmp_path: Path, max_size: int = 1200) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000000500.timeindex", BASE, max_size)


def test_empty_index(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=125)
    assert idx.path.stat().st_size == 120
    assert (idx.entries, idx.max_entries) == (0, 10)
    assert idx.last_entry == TimestampOffset(-1, BASE)
    assert idx.lookup(10**12) == (-1, BASE)
    idx.close()


def test_maybe_append_only_on_a_larger_timestamp(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.maybe_append(-1, BASE + 1)  # not above the empty index's -1
    assert idx.entries == 0
    idx.maybe_append(100, BASE + 2)
    idx.maybe_append(100, BASE + 5)  # same timestamp: ignored
    idx.maybe_append(90, BASE + 6)  # older timestamp: ignored
    idx.maybe_append(200, BASE + 9)
    assert idx.entries == 2
    assert idx.last_entry == (200, BASE + 9)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(300, BASE + 8)
    idx.maybe_append(300, BASE + 9)  # same offset, newer timestamp: allowed
    assert [idx.entry(i) for i in range(idx.entries)] == [
        (100, BASE + 2), (200, BASE + 9), (300, BASE + 9)]
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">qiqiqi", 100, 2, 200, 9, 300, 9)


def test_lookup(tmp_path: Path) -> None:
    idx = make(tmp_path)
    for ts, rel in [(100, 2), (200, 9), (300, 15)]:
        idx.maybe_append(ts, BASE + rel)
    assert idx.lookup(99) == (-1, BASE)
    assert idx.lookup(100) == (100, BASE + 2)
    assert idx.lookup(250) == (200, BASE + 9)
    assert idx.lookup(10**15) == (300, BASE + 15)
    idx.close()


@pytest.mark.parametrize(
    ("offset", "last"),
    [(BASE, (-1, BASE)), (BASE + 2, (-1, BASE)), (BASE + 3, (100, BASE + 2)),
     (BASE + 9, (100, BASE + 2)), (BASE + 10, (200, BASE + 9)), (BASE + 99, (300, BASE + 15))],
)
def test_truncate_to(tmp_path: Path, offset: int, last: tuple[int, int]) -> None:
    idx = make(tmp_path)
    for ts, rel in [(100, 2), (200, 9), (300, 15)]:
        idx.maybe_append(ts, BASE + rel)
    idx.truncate_to(offset)
    assert idx.last_entry == last
    idx.maybe_append(400, BASE + 20)
    assert idx.last_entry == (400, BASE + 20)
    idx.sanity_check()
    idx.close()


def test_last_slot_is_reserved_for_the_roll_entry(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=36)  # three entries
    idx.maybe_append(1, BASE + 1)
    assert not idx.is_full()
    idx.maybe_append(2, BASE + 2)
    assert idx.is_full()  # one slot left, kept for on_become_inactive_segment / close
    with pytest.raises(IndexError):
        idx.maybe_append(3, BASE + 3)
    idx.maybe_append(3, BASE + 3, skip_full_check=True)
    assert idx.entries == 3
    with pytest.raises(IndexError):
        idx.maybe_append(4, BASE + 4, skip_full_check=True)
    idx.close()


def test_reopen_trimmed_and_crashed_files(tmp_path: Path) -> None:
    idx = make(tmp_path)
    for i in range(1, 4):
        idx.maybe_append(i * 10, BASE + i)
    idx.flush()
    crashed = tmp_path / "crash"
    crashed.mkdir()
    shutil.copy(idx.path, crashed / idx.path.name)
    idx.close()

    clean = make(tmp_path)
    assert (clean.entries, clean.last_entry) == (3, (30, BASE + 3))
    clean.sanity_check()
    clean.maybe_append(40, BASE + 4)  # grows back from its trimmed size
    assert clean.entries == 4
    clean.close()

    untrimmed = TimeIndex(crashed / idx.path.name, BASE, 1200)
    assert untrimmed.entries == 100
    with pytest.raises(CorruptIndexError):
        untrimmed.sanity_check()
    untrimmed.reset()
    untrimmed.sanity_check()
    untrimmed.close()


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">qiqi", 100, 1, 100, 2),  # repeated timestamp
        struct.pack(">qiqi", 100, 1, 90, 2),  # decreasing timestamp
        struct.pack(">qiqi", 100, 5, 200, 4),  # decreasing offset
        struct.pack(">qi", 100, -3),  # below the base offset
        struct.pack(">qi", 100, 1) + b"\x00",  # not whole entries
    ],
)
def test_sanity_check_rejects(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "bad.timeindex"
    path.write_bytes(body)
    idx = TimeIndex(path, BASE, 1200)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close()
