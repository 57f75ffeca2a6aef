"""LeaderEpochFileCache: Kafka's assign rules, OffsetForLeaderEpoch answers, truncation, files."""

import os
from pathlib import Path

import pytest

from strata.storage.checkpoints import EpochEntry, LeaderEpochCheckpointFile
from strata.storage.leader_epoch_cache import LeaderEpochFileCache


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.epoch_entries()]


def on_disk(tmp_path: Path) -> list[tuple[int, int]]:
    cp = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    return [(e.epoch, e.start_offset) for e in cp.read()]


def test_empty_cache(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    assert cache.latest_epoch is None and cache.latest_entry is None
    assert cache.earliest_entry is None and cache.previous_epoch() is None
    assert cache.epoch_for_offset(0) is None
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert not (tmp_path / "leader-epoch-checkpoint").exists()  # nothing changed, nothing written


def test_assign_appends_and_persists(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    assert pairs(cache) == [(0, 0), (2, 10), (5, 30)]
    assert cache.latest_epoch == 5 and cache.latest_entry == EpochEntry(5, 30)
    assert cache.earliest_entry == EpochEntry(0, 0)
    assert cache.previous_epoch() == 2 and cache.epoch_entry(2) == EpochEntry(2, 10)
    assert cache.epoch_entry(3) is None
    assert on_disk(tmp_path) == [(0, 0), (2, 10), (5, 30)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"


def test_same_epoch_at_a_later_offset_is_ignored_and_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = cache_with(tmp_path, (1, 10))
    writes: list[object] = []
    monkeypatch.setattr(cache.checkpoint, "write", writes.append)
    cache.assign(1, 15)
    cache.assign(1, 10)
    assert pairs(cache) == [(1, 10)] and writes == []


def test_same_epoch_at_an_earlier_offset_moves_its_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    cache.assign(1, 5)
    assert pairs(cache) == [(0, 0), (1, 5)]
    assert on_disk(tmp_path) == [(0, 0), (1, 5)]


@pytest.mark.parametrize(
    ("epoch", "start", "expected"),
    [
        (3, 25, [(2, 10), (3, 25)]),  # a lower epoch: entries with epoch >= 3 go
        (5, 15, [(2, 10), (5, 15)]),  # a higher epoch below later starts: those entries go
        (6, 40, [(2, 10), (3, 20), (4, 30), (6, 40)]),  # the normal case
        (6, 30, [(2, 10), (3, 20), (6, 30)]),  # same start as the latest: the latest goes
        (1, 5, [(1, 5)]),  # below everything: everything goes
    ],
)
def test_conflicting_entries_are_removed_from_the_end(
    tmp_path: Path, epoch: int, start: int, expected: list[tuple[int, int]]
) -> None:
    cache = cache_with(tmp_path, (2, 10), (3, 20), (4, 30))
    cache.assign(epoch, start)
    assert pairs(cache) == expected
    assert on_disk(tmp_path) == expected


def test_negative_epoch_or_offset_is_rejected(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


# Entries (0, 0), (1, 10), (3, 20), (5, 40); log end offset 50.
@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),  # UNDEFINED_EPOCH: a bootstrapping follower
        (5, (5, 50)),  # the latest epoch ends at the log end offset
        (0, (0, 10)),
        (1, (1, 20)),
        (2, (1, 20)),  # unknown epoch: the largest epoch below it, ending where 3 starts
        (3, (3, 40)),
        (4, (3, 40)),
        (6, (-1, -1)),  # above the latest epoch
        (100, (-1, -1)),
    ],
)
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10), (3, 20), (5, 40))
    assert cache.end_offset_for(requested, 50) == expected


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (0, (0, 10)),  # below the earliest epoch (retention removed older ones): Kafka's answer
        (1, (1, 10)),  # is the requested epoch ending where the earliest known one starts
        (2, (2, 20)),
        (3, (2, 20)),
        (4, (4, 99)),
    ],
)
def test_end_offset_for_epochs_below_the_earliest(
    tmp_path: Path, requested: int, expected: tuple[int, int]
) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 20))
    assert cache.end_offset_for(requested, 99) == expected


@pytest.mark.parametrize(
    ("offset", "epoch"),
    [(0, None), (9, None), (10, 1), (15, 1), (20, 3), (39, 3), (40, 5), (10_000, 5)],
)
def test_epoch_for_offset(tmp_path: Path, offset: int, epoch: int | None) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 20), (5, 40))
    assert cache.epoch_for_offset(offset) == epoch


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (41, [(1, 10), (3, 20), (5, 40)]),  # nothing starts at or after 41
        (40, [(1, 10), (3, 20)]),
        (25, [(1, 10), (3, 20)]),
        (20, [(1, 10)]),
        (11, [(1, 10)]),
        (10, []),
        (0, []),
    ],
)
def test_truncate_from_end(tmp_path: Path, end: int, expected: list[tuple[int, int]]) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 20), (5, 40))
    cache.truncate_from_end(end)
    assert pairs(cache) == expected
    assert on_disk(tmp_path) == expected


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (0, [(1, 10), (3, 20), (5, 40)]),  # before the first entry: unchanged
        (10, [(1, 10), (3, 20), (5, 40)]),  # exclusive: an entry starting there stays
        (15, [(1, 15), (3, 20), (5, 40)]),  # the epoch holding 15 now starts there
        (20, [(3, 20), (5, 40)]),
        (39, [(3, 39), (5, 40)]),
        (45, [(5, 45)]),
    ],
)
def test_truncate_from_start(
    tmp_path: Path, start: int, expected: list[tuple[int, int]]
) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 20), (5, 40))
    cache.truncate_from_start(start)
    assert pairs(cache) == expected
    assert on_disk(tmp_path) == expected


def test_clear_and_flush(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 10), (3, 20))
    cache.clear_and_flush()
    assert pairs(cache) == []
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    assert pairs(LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")) == []


def test_state_survives_reopen(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10), (3, 20), (5, 40))
    cache.truncate_from_end(40)
    cache.truncate_from_start(12)
    reopened = LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint"))
    assert pairs(reopened) == [(1, 12), (3, 20)]
    assert not reopened.checkpoint_corrupt
    assert reopened.end_offset_for(1, 30) == (1, 20)
    assert reopened.end_offset_for(3, 30) == (3, 30)


def test_a_corrupt_checkpoint_starts_empty_and_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n1 10\n")
    cache = LeaderEpochFileCache(path)
    assert cache.checkpoint_corrupt and pairs(cache) == []
    cache.assign(4, 100)
    assert on_disk(tmp_path) == [(4, 100)]


def test_a_non_monotonic_file_is_repaired_by_the_assign_rules(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n3\n1 10\n3 30\n2 20\n")
    assert pairs(LeaderEpochFileCache(path)) == [(1, 10), (2, 20)]


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_assign_writes_without_fsync_and_sync_makes_it_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KAFKA-15046: the append path's assign renames a new file in place without fsync; ``sync``
    fsyncs the file and its dir once, and again only after another unsynced write."""
    fsyncs = _count_fsyncs(monkeypatch)
    cache = cache_with(tmp_path, (0, 0), (3, 50))
    assert on_disk(tmp_path) == [(0, 0), (3, 50)] and fsyncs == []
    cache.sync()
    assert len(fsyncs) == 2  # the file, then the directory
    cache.sync()
    assert len(fsyncs) == 2  # nothing unsynced since
    cache.assign(4, 60)
    cache.sync()
    assert len(fsyncs) == 4 and on_disk(tmp_path) == [(0, 0), (3, 50), (4, 60)]


def test_truncations_stay_durable_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    cache = cache_with(tmp_path, (0, 0), (3, 50), (5, 70))
    fsyncs = _count_fsyncs(monkeypatch)
    cache.truncate_from_end(60)
    assert len(fsyncs) == 2 and on_disk(tmp_path) == [(0, 0), (3, 50)]
    cache.truncate_from_start(10)
    assert len(fsyncs) == 4 and on_disk(tmp_path) == [(0, 10), (3, 50)]
    cache.sync()
    assert len(fsyncs) == 4  # the durable writes left nothing to sync
