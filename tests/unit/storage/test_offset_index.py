"""OffsetIndex (.index) and the AbstractIndex mechanics under it: preallocation, binary search,
truncation, trimming, reopening and the sanity check that catches a crashed (untrimmed) file."""

import random
import shutil
import struct
from pathlib import Path

import pytest

from strata.storage.abstract_index import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
)
from strata.storage.offset_index import OffsetIndex, OffsetPosition

BASE = 1000


def make(tmp_path: Path, max_size: int = 800, base: int = BASE) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000001000.index", base, max_size)


def test_new_index_is_preallocated_to_whole_entries(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=100)
    assert idx.path.stat().st_size == 96  # rounded down to 8-byte entries
    assert (idx.entries, idx.max_entries, idx.is_full()) == (0, 12, False)
    assert idx.last_offset == BASE
    assert idx.lookup(BASE + 5) == OffsetPosition(BASE, 0)
    idx.close()
    assert idx.path.stat().st_size == 0  # trimmed to its (no) entries


def test_lookup_returns_largest_entry_at_or_below_target(tmp_path: Path) -> None:
    idx = make(tmp_path)
    for rel, pos in [(3, 100), (7, 250), (20, 900)]:
        idx.append(BASE + rel, pos)
    assert idx.entries == 3 and idx.last_offset == BASE + 20
    assert idx.lookup(BASE - 1) == (BASE, 0)
    assert idx.lookup(BASE + 2) == (BASE, 0)
    assert idx.lookup(BASE + 3) == (BASE + 3, 100)
    assert idx.lookup(BASE + 6) == (BASE + 3, 100)
    assert idx.lookup(BASE + 7) == (BASE + 7, 250)
    assert idx.lookup(BASE + 19) == (BASE + 7, 250)
    assert idx.lookup(BASE + 10**9) == (BASE + 20, 900)
    assert idx.entry(1) == (BASE + 7, 250)
    with pytest.raises(IndexError):
        idx.entry(3)


def test_entries_are_big_endian_relative_offset_and_position(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.append(BASE + 3, 100)
    idx.append(BASE + 0x01020304, 0x0A0B0C0D)
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">iiii", 3, 100, 0x01020304, 0x0A0B0C0D)


def test_append_rejects_out_of_order_overflow_and_full(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=24)
    idx.append(BASE + 5, 10)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 5, 20)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 4, 20)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 20)
    with pytest.raises(ValueError):
        idx.append(BASE + 6, -1)
    idx.append(BASE + 6, 20)
    idx.append(BASE + 7, 30)
    assert idx.is_full()
    with pytest.raises(IndexError):
        idx.append(BASE + 8, 40)
    assert not idx.can_append_offset(BASE - 1)
    assert idx.can_append_offset(BASE + 2**31 - 1)


def test_first_entry_may_be_at_the_base_offset(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.append(BASE, 50)
    assert idx.lookup(BASE) == (BASE, 50)
    with pytest.raises(IndexOffsetOverflowError):
        OffsetIndex(tmp_path / "other.index", BASE, 800).append(BASE - 1, 0)


@pytest.mark.parametrize(
    ("truncate_to", "kept"),
    [(BASE, 0), (BASE + 3, 0), (BASE + 4, 1), (BASE + 7, 1), (BASE + 8, 2), (BASE + 21, 3)],
)
def test_truncate_to_removes_entries_at_or_above_offset(
    tmp_path: Path, truncate_to: int, kept: int
) -> None:
    idx = make(tmp_path)
    for rel, pos in [(3, 100), (7, 250), (20, 900)]:
        idx.append(BASE + rel, pos)
    idx.truncate_to(truncate_to)
    assert idx.entries == kept
    assert idx.last_offset == (BASE if kept == 0 else idx.entry(kept - 1).offset)
    idx.append(BASE + 25, 1000)  # appending continues after the kept entries
    assert idx.lookup(BASE + 30) == (BASE + 25, 1000)
    idx.sanity_check()


def test_trimmed_index_reopens_with_its_entries_and_grows_on_append(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=800)
    idx.append(BASE + 1, 10)
    idx.append(BASE + 2, 20)
    idx.close()
    idx.close()  # idempotent
    assert idx.path.stat().st_size == 16
    again = make(tmp_path, max_size=800)
    assert (again.entries, again.last_offset, again.is_full()) == (2, BASE + 2, False)
    again.sanity_check()
    again.append(BASE + 3, 30)  # the trimmed file grows back to its capacity
    assert again.length == 800
    assert again.lookup(BASE + 3) == (BASE + 3, 30)
    again.close()
    assert again.path.stat().st_size == 24


def test_crashed_preallocated_index_fails_sanity_check(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=800)
    for i in range(1, 6):
        idx.append(BASE + i, i * 100)
    idx.flush()
    crashed = tmp_path / "crash"
    crashed.mkdir()
    shutil.copy(idx.path, crashed / idx.path.name)  # the file as a crash leaves it: untrimmed
    reopened = OffsetIndex(crashed / idx.path.name, BASE, 800)
    assert reopened.entries == 100  # length // entry size: the zero tail counts
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()
    reopened.reset()
    assert reopened.entries == 0 and reopened.length == 800
    reopened.sanity_check()
    idx.close()
    reopened.close()


def test_zero_length_file_opens_without_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.touch()
    idx = OffsetIndex(path, BASE, 80)
    assert (idx.entries, idx.length) == (0, 0)
    assert idx.lookup(BASE + 9) == (BASE, 0)
    idx.sanity_check()
    idx.truncate_to(BASE)
    idx.flush()
    idx.append(BASE + 1, 8)
    assert idx.entries == 1 and idx.length == 80
    idx.close()


def test_sanity_check_rejects_bad_length_and_unordered_entries(tmp_path: Path) -> None:
    path = tmp_path / "bad.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x00")
    idx = OffsetIndex(path, BASE, 800)
    assert idx.entries == 1
    with pytest.raises(CorruptIndexError, match="multiple"):
        idx.sanity_check()
    idx.close()
    for body in (
        struct.pack(">iiii", 5, 10, 5, 20),  # repeated offset
        struct.pack(">iiii", 5, 10, 4, 20),  # decreasing offset
        struct.pack(">iiii", 5, 20, 6, 10),  # decreasing position
        struct.pack(">ii", -1, 10),  # below the base offset
    ):
        path.write_bytes(body)
        idx = OffsetIndex(path, BASE, 800)
        with pytest.raises(CorruptIndexError):
            idx.sanity_check()
        idx.close()


def test_mark_corrupt_until_reset(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.mark_corrupt("missing")
    with pytest.raises(CorruptIndexError, match="missing"):
        idx.sanity_check()
    idx.reset()
    idx.sanity_check()
    idx.close()


def test_resize_and_trim(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=800)
    for i in range(1, 4):
        idx.append(BASE + i, i)
    assert idx.resize(801) is False  # already 800 once rounded down
    assert idx.resize(20) is True  # drops the third entry
    assert (idx.entries, idx.length, idx.last_offset) == (2, 16, BASE + 2)
    idx.trim_to_valid_size()
    assert idx.path.stat().st_size == 16
    idx.truncate_to_entries(0)
    assert idx.last_offset == BASE
    with pytest.raises(ValueError):
        idx.truncate_to_entries(1)
    idx.close()


def test_rename_and_delete(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.append(BASE + 1, 10)
    target = tmp_path / "00000000000000001000.index.deleted"
    idx.rename_to(target)
    assert idx.path == target and target.exists()
    assert idx.lookup(BASE + 1) == (BASE + 1, 10)  # the mapping survives the rename
    assert idx.delete() is True
    assert not target.exists()
    assert idx.delete() is False


def test_read_only_index(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "absent.index", BASE, 800, writable=False)
    idx = make(tmp_path)
    idx.append(BASE + 1, 10)
    idx.close()
    ro = OffsetIndex(idx.path, BASE, 800, writable=False)
    assert ro.lookup(BASE + 2) == (BASE + 1, 10)
    assert ro.is_full()  # a read-only index holds exactly its entries
    with pytest.raises(ValueError):
        ro.append(BASE + 2, 20)
    ro.close()


def test_lookup_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(7)
    idx = make(tmp_path, max_size=8 * 600)
    rels = sorted(rng.sample(range(1, 100_000), 500))
    for n, rel in enumerate(rels):
        idx.append(BASE + rel, n * 10)
    for target in [*rng.sample(range(-5, 100_005), 400), *rels[:50]]:
        below = [(r, n * 10) for n, r in enumerate(rels) if r <= target]
        expected = (BASE + below[-1][0], below[-1][1]) if below else (BASE, 0)
        assert idx.lookup(BASE + target) == expected
    idx.close()


def test_sanity_check_samples_large_indexes(tmp_path: Path) -> None:
    n = 5000
    idx = make(tmp_path, max_size=8 * n)
    for i in range(n):
        idx.append(BASE + 2 * i + 1, 10 * i + 1)
    idx.sanity_check()  # a sample of slots, the last two included
    idx.flush()
    raw = bytearray(idx.path.read_bytes())
    idx.close()
    holed = tmp_path / "holed.index"
    raw[8 * 2000 : 8 * 2512] = bytes(8 * 512)  # one zeroed 4 KiB page in the middle
    holed.write_bytes(bytes(raw))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(holed, BASE, 8 * n).sanity_check()


def test_single_zero_slot_at_the_end_is_caught(tmp_path: Path) -> None:
    idx = make(tmp_path, max_size=80)
    for i in range(9):  # one slot short of full: a crash leaves one zero entry
        idx.append(BASE + i + 1, i + 1)
    idx.flush()
    crashed = tmp_path / "crashed.index"
    shutil.copy(idx.path, crashed)
    idx.close()
    with pytest.raises(CorruptIndexError):
        OffsetIndex(crashed, BASE, 80).sanity_check()
