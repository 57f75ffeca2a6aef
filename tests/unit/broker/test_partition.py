"""Partition: leadership, min.insync.replicas, the high watermark rule, reads by isolation,
offsets by timestamp, DeleteRecords."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.replication.partition import (
    FencedLeaderEpochError,
    FetchIsolation,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    Partition,
    PolicyViolationError,
    UnknownLeaderEpochError,
    error_code_of,
)
from strata.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    UnsupportedForMessageFormatError,
)

from .helpers import TOPIC_ID, batch, log_manager, now_ms


def partition(tmp_path: Path, epoch: int = 3, **config: str) -> Partition:
    lm = log_manager(tmp_path, **config)
    if config:
        lm.set_topic_config("t", {k.replace("_", "."): v for k, v in config.items()})
    hosted = Partition("t", 0, TOPIC_ID, lm.get_or_create_log("t", 0), epoch, node_id=1)
    hosted.make_leader(epoch)
    return hosted


def test_append_assigns_offsets_and_moves_hw_to_leo(tmp_path: Path) -> None:
    p = partition(tmp_path)
    assert (p.high_watermark, p.log_end_offset, p.log_start_offset) == (0, 0, 0)
    info = p.append_records_to_leader(batch(b"a", b"b", b"c"), required_acks=1)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert p.high_watermark == p.log_end_offset == 3
    assert p.last_stable_offset == 3
    info = p.append_records_to_leader(batch(b"d"), required_acks=-1)
    assert info.first_offset == 3 and p.high_watermark == 4
    # the leader epoch is written into the batch
    data = p.read_records(3, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    raw = data.slices[0].read_bytes()
    assert int.from_bytes(raw[12:16], "big", signed=True) == 3


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    p = partition(tmp_path, min_insync_replicas="2")
    with pytest.raises(NotEnoughReplicasError) as err:
        p.append_records_to_leader(batch(b"a"), required_acks=-1)
    assert error_code_of(err.value) == 19
    assert p.log_end_offset == 0  # nothing written
    assert p.append_records_to_leader(batch(b"a"), required_acks=1).first_offset == 0


def test_not_leader_refuses_appends_and_reads(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.leader_id = 2
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_records_to_leader(batch(b"a"), 1)
    with pytest.raises(NotLeaderOrFollowerError):
        p.read_records(0, 100, FetchIsolation.HIGH_WATERMARK, True)
    assert not p.maybe_increment_high_watermark()
    p.make_leader(4)
    assert p.is_leader and p.leader_epoch == 4
    with pytest.raises(FencedLeaderEpochError):
        p.make_leader(3)


def test_leader_epoch_checks(tmp_path: Path) -> None:
    p = partition(tmp_path, epoch=5)
    p.check_leader_epoch(-1)
    p.check_leader_epoch(5)
    with pytest.raises(FencedLeaderEpochError):
        p.check_leader_epoch(4)
    with pytest.raises(UnknownLeaderEpochError):
        p.read_records(0, 100, FetchIsolation.HIGH_WATERMARK, True, current_leader_epoch=6)


def test_reads_are_bounded_by_isolation(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append_records_to_leader(batch(b"a"), 1)
    p.append_records_to_leader(batch(b"b"), 1)
    # pretend a follower is behind: the HW stays at 1 while the LEO is 2
    p.log.update_high_watermark(1)
    consumer = p.read_records(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    committed = p.read_records(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    follower = p.read_records(0, 1 << 20, FetchIsolation.LOG_END, True)
    one = len(batch(b"a"))
    assert consumer.size == committed.size == one
    assert follower.size == 2 * one
    assert (consumer.high_watermark, consumer.last_stable_offset) == (1, 1)
    assert follower.log_end_offset == 2
    # between HW and LEO a consumer gets nothing, no error
    assert p.read_records(1, 1 << 20, FetchIsolation.HIGH_WATERMARK, True).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        p.read_records(3, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)


def test_min_one_message_returns_a_whole_batch_over_max_bytes(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append_records_to_leader(batch(b"x" * 500), 1)
    assert p.read_records(0, 10, FetchIsolation.HIGH_WATERMARK, True).size > 500
    # without it a first batch that does not fit is not sent at all (Kafka's readFromLog for
    # Fetch v3+): part of a batch alone makes clients fail with "no complete records"
    assert p.read_records(0, 10, FetchIsolation.HIGH_WATERMARK, False).size == 0


def test_storage_errors_carry_kafka_codes(tmp_path: Path) -> None:
    p = partition(tmp_path)
    good = bytearray(batch(b"a"))
    good[-1] ^= 0xFF  # breaks the CRC
    with pytest.raises(CorruptRecordError) as err:
        p.append_records_to_leader(bytes(good), 1)
    assert error_code_of(err.value) == 2
    legacy = bytearray(batch(b"a"))
    legacy[16] = 1
    with pytest.raises(UnsupportedForMessageFormatError):
        p.append_records_to_leader(bytes(legacy), 1)
    assert error_code_of(ValueError()) == -1


def test_offsets_for_timestamps(tmp_path: Path) -> None:
    p = partition(tmp_path, epoch=7)
    base = now_ms() - 60_000
    for i in range(3):
        p.append_records_to_leader(batch(b"v", timestamp=base + i * 1000), 1)
    hw = FetchIsolation.HIGH_WATERMARK
    latest = p.fetch_offset_for_timestamp(-1, hw)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (3, 7)
    earliest = p.fetch_offset_for_timestamp(-2, hw)
    assert earliest is not None and earliest.offset == 0
    by_ts = p.fetch_offset_for_timestamp(base + 1500, hw)
    assert by_ts is not None and (by_ts.offset, by_ts.timestamp) == (2, base + 2000)
    assert p.fetch_offset_for_timestamp(base + 5000, hw) is None
    top = p.fetch_offset_for_timestamp(-3, hw)
    assert top is not None and (top.offset, top.timestamp) == (2, base + 2000)
    # offsets at or past the HW are not visible to consumers yet
    p.log.update_high_watermark(2)
    assert p.fetch_offset_for_timestamp(base + 1500, hw) is None
    follower = p.fetch_offset_for_timestamp(base + 1500, FetchIsolation.LOG_END)
    assert follower is not None and follower.offset == 2
    latest = p.fetch_offset_for_timestamp(-1, hw)
    assert latest is not None and latest.offset == 2


def test_delete_records(tmp_path: Path) -> None:
    p = partition(tmp_path)
    for v in (b"a", b"b", b"c"):
        p.append_records_to_leader(batch(v), 1)
    assert p.delete_records_on_leader(1) == 1  # the offset the low watermark must reach
    assert (p.delete_records_on_leader(0), p.log_start_offset) == (0, 1)  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        p.delete_records_on_leader(4)
    with pytest.raises(OffsetOutOfRangeError):
        p.delete_records_on_leader(-5)
    assert p.delete_records_on_leader(-1) == 3  # -1 = the high watermark
    assert p.log_start_offset == 3


def test_delete_records_refused_on_compacted_topics(tmp_path: Path) -> None:
    p = partition(tmp_path, cleanup_policy="compact")
    with pytest.raises(PolicyViolationError):
        p.delete_records_on_leader(0)


def test_a_new_partition_has_no_role_and_leaves_the_high_watermark_alone(
        tmp_path: Path) -> None:
    lm = log_manager(tmp_path)
    log = lm.get_or_create_log("t", 0)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=3)  # e.g. an unreplicated tail
    hosted = Partition("t", 0, TOPIC_ID, log, 3, node_id=1)
    assert not hosted.is_leader
    assert (hosted.high_watermark, hosted.log_end_offset) == (0, 2)
    with pytest.raises(NotLeaderOrFollowerError):
        hosted.append_records_to_leader(batch(b"c"), required_acks=-1)
    hosted.make_follower(None, 4, replicas=(1, 2), isr=frozenset((1, 2)), partition_epoch=1)
    assert not hosted.maybe_increment_high_watermark() and hosted.high_watermark == 0
    # Led again with a follower in the ISR: the HW waits for that follower's fetch.
    hosted.make_leader(5, replicas=(1, 2), isr=frozenset((1, 2)))
    assert hosted.high_watermark == 0
