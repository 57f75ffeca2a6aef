"""The nemesis's pure parts: fault plans from a seed, ``--kinds`` parsing, and segment damage on
hand-built log directories (files only, no broker processes)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from strata.cli.chaos import parse_kinds, parse_settings
from strata.cli.chaos_campaign import kinds_available
from strata.cli.chaos_nemesis import (
    NETWORK_KINDS,
    PROCESS_KINDS,
    QUICK_TIMING,
    FaultKind,
    plan_faults,
)
from strata.cli.chaos_segments import (
    batch_writers,
    damage_tail,
    read_replica,
    whole_batches,
)
from strata.cli.errors import CliError
from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from strata.storage.records import RecordSpec, build_batch

TOPIC = "chaos"


def test_the_same_seed_plans_the_same_faults() -> None:
    first = plan_faults(42, 50, list(FaultKind), QUICK_TIMING)
    assert first == plan_faults(42, 50, list(FaultKind), QUICK_TIMING)
    assert first != plan_faults(43, 50, list(FaultKind), QUICK_TIMING)
    assert len({f.kind for f in first}) > 5


def test_plans_stay_inside_the_kinds_and_timing_asked_for() -> None:
    plan = plan_faults(7, 200, [FaultKind.PAUSE, FaultKind.KILL_ALL], QUICK_TIMING)
    assert {f.kind for f in plan} == {FaultKind.PAUSE, FaultKind.KILL_ALL}
    for fault in plan:
        low, high = QUICK_TIMING.pause if fault.kind == FaultKind.PAUSE else QUICK_TIMING.hold
        assert low <= fault.hold_s <= high
        assert QUICK_TIMING.gap[0] <= fault.gap_s <= QUICK_TIMING.gap[1]


def test_kinds_parse_by_name_and_by_group() -> None:
    assert parse_kinds("kill-all, pause") == [FaultKind.KILL_ALL, FaultKind.PAUSE]
    assert parse_kinds("process") == list(PROCESS_KINDS)
    assert set(parse_kinds("all")) == set(FaultKind)
    with pytest.raises(CliError, match="unknown fault kind 'kill-everything'"):
        parse_kinds("kill-everything")


def test_network_kinds_are_dropped_with_a_reason_without_namespaces() -> None:
    playable, skipped = kinds_available(list(FaultKind), netns_ok=False)
    assert set(playable) == set(PROCESS_KINDS)
    assert len(skipped) == len(NETWORK_KINDS)
    assert kinds_available(list(FaultKind), netns_ok=True) == (list(FaultKind), [])


def write_log(log_dir: Path, batches: int, recovery_point: int, clean: bool) -> Path:
    """A log dir with partition 0 of TOPIC: ``batches`` batches of 3 records each."""
    part = log_dir / f"{TOPIC}-0"
    part.mkdir(parents=True)
    data = b"".join(
        build_batch([RecordSpec(value=b"value-%d" % (3 * i + j)) for j in range(3)],
                    base_offset=3 * i)
        for i in range(batches))
    (part / "00000000000000000000.log").write_bytes(data)
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write({(TOPIC, 0): recovery_point})
    if clean:
        (log_dir / CLEAN_SHUTDOWN_FILE).touch()
    return part / "00000000000000000000.log"


def test_after_kill_only_bytes_past_the_recovery_point_are_torn(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=10, recovery_point=21, clean=False)
    before = segment.read_bytes()
    flushed_end = whole_batches(before)[7].position  # batches 0-6 hold offsets 0-20
    for seed in range(20):
        segment.write_bytes(before)
        note = damage_tail(tmp_path, TOPIC, random.Random(seed), clean=False, mode="truncate")
        after = segment.read_bytes()
        assert "torn at byte" in note
        assert flushed_end <= len(after) < len(before)
        assert after == before[: len(after)]


def test_after_kill_a_corrupted_byte_lies_in_an_unflushed_batch(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=10, recovery_point=21, clean=False)
    before = segment.read_bytes()
    note = damage_tail(tmp_path, TOPIC, random.Random(3), clean=False, mode="corrupt")
    after = segment.read_bytes()
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert len(changed) == 1 and "flipped byte" in note
    assert changed[0] >= whole_batches(before)[7].position + 21
    # Recovery's reading stops at the corrupted batch: nothing after it is served.
    assert max(read_replica(segment.parent, 1000)) < 30


def test_a_fully_flushed_log_is_left_intact_after_kill(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=4, recovery_point=12, clean=False)
    before = segment.read_bytes()
    note = damage_tail(tmp_path, TOPIC, random.Random(1), clean=False, mode="truncate")
    assert "left intact" in note and segment.read_bytes() == before


def test_after_sigterm_whole_batches_are_cut_and_the_marker_removed(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=10, recovery_point=30, clean=True)
    before = segment.read_bytes()
    note = damage_tail(tmp_path, TOPIC, random.Random(5), clean=True)
    after = segment.read_bytes()
    assert "whole batch" in note
    assert len(after) in {b.position for b in whole_batches(before)}
    assert 5 <= len(whole_batches(after)) <= 9
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_a_replica_read_decodes_every_record_below_the_limit(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=4, recovery_point=0, clean=False)
    records = read_replica(segment.parent, 7)
    assert records == {o: b"value-%d" % o for o in range(7)}


def test_the_writer_of_each_record_is_read_from_the_batch_headers(tmp_path: Path) -> None:
    part = tmp_path / f"{TOPIC}-0"
    part.mkdir()
    specs = [RecordSpec(value=b"v%d" % j) for j in range(3)]
    (part / "00000000000000000000.log").write_bytes(
        build_batch(specs, base_offset=0, producer_id=7, producer_epoch=0, base_sequence=10)
        + build_batch(specs, base_offset=3, producer_id=7, producer_epoch=1, base_sequence=0)
        + build_batch(specs, base_offset=6))
    writers = batch_writers(part, 8)
    assert sorted(writers) == list(range(8))  # below the limit only
    assert (writers[0], writers[1], writers[2]) == ((7, 0, 10), (7, 0, 11), (7, 0, 12))
    assert (writers[3], writers[5]) == ((7, 1, 0), (7, 1, 2))
    assert writers[6] == writers[7] == (-1, -1, -1)  # no producer id: no sequence


def test_broker_settings_parse_as_key_value_pairs() -> None:
    assert parse_settings(["broker.session.timeout.ms=9000", " a = b "]) == {
        "broker.session.timeout.ms": "9000", "a": "b"}
    with pytest.raises(CliError, match="expected KEY=VALUE"):
        parse_settings(["broker.session.timeout.ms"])


def test_only_eligible_partitions_are_damaged(tmp_path: Path) -> None:
    segment = write_log(tmp_path, batches=4, recovery_point=0, clean=False)
    before = segment.read_bytes()
    note = damage_tail(tmp_path, TOPIC, random.Random(1), clean=False, eligible={1, 2})
    assert "no eligible" in note and segment.read_bytes() == before
    damage_tail(tmp_path, TOPIC, random.Random(1), clean=False, eligible={0})
    assert segment.read_bytes() != before
