"""ProducerStateManager: Kafka's idempotence rules, expiration, snapshots, truncation."""

import struct
from pathlib import Path

import crc32c
import pytest

from strata.storage.clock import ManualClock
from strata.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from strata.storage.log_file_names import producer_snapshot_file
from strata.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decrement_sequence,
    read_snapshot,
)
from strata.storage.record_batch import BatchHeader
from strata.storage.records import ControlRecordType, EndTransactionMarker

EXPIRATION_MS = 60_000
T0 = 1_700_000_000_000


def header(pid: int, epoch: int, base_seq: int, count: int = 1, ts: int = T0) -> BatchHeader:
    return BatchHeader(
        base_offset=0, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
        producer_id=pid, producer_epoch=epoch, base_sequence=base_seq, records_count=count,
    )


def append(psm: ProducerStateManager, h: BatchHeader, offset: int) -> int:
    """What the Log does on a leader append; returns the next offset."""
    assert psm.check(h) is None
    last = offset + h.last_offset_delta
    psm.update(h, offset, last, h.max_timestamp)
    return last + 1


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, EXPIRATION_MS)


# ------------------------------------------------------------------ sequence rules
def test_an_unknown_producer_may_start_at_any_sequence(psm: ProducerStateManager) -> None:
    assert psm.check(header(7, 0, 42)) is None
    assert psm.check(header(7, 3, 99)) is None
    assert psm.last_entry(7) is None  # check never changes state


def test_in_sequence_batches_are_accepted(psm: ProducerStateManager) -> None:
    offset = append(psm, header(1, 0, 0, count=3), 0)
    offset = append(psm, header(1, 0, 3, count=2), offset)
    entry = psm.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (0, 0, 4)
    assert (entry.first_data_offset, entry.last_data_offset, entry.last_offset_delta) == (0, 4, 1)
    assert psm.map_end_offset == offset == 5


@pytest.mark.parametrize("next_seq", [4, 6, 100, 0, 1])
def test_a_sequence_gap_is_out_of_order(psm: ProducerStateManager, next_seq: int) -> None:
    append(psm, header(1, 0, 0, count=5), 0)  # sequences 0..4
    with pytest.raises(OutOfOrderSequenceError, match="out of order sequence") as info:
        psm.check(header(1, 0, next_seq))
    assert info.value.error_code == 45


def test_duplicates_of_each_of_the_last_five_batches(psm: ProducerStateManager) -> None:
    offset, seq, sent = 0, 0, []
    for count in (1, 2, 3, 1, 2, 4):  # six batches: the first falls out of the window
        h = header(1, 0, seq, count=count, ts=T0 + seq)
        sent.append((h, offset))
        offset = append(psm, h, offset)
        seq += count
    for h, first in sent[1:]:
        dup = psm.check(h)
        assert dup is not None
        assert (dup.first_seq, dup.last_seq) == (h.base_sequence, h.last_sequence)
        assert (dup.first_offset, dup.last_offset) == (first, first + h.last_offset_delta)
        assert dup.last_offset - dup.offset_delta == first and dup.timestamp == h.max_timestamp
    oldest, _ = sent[0]
    with pytest.raises(OutOfOrderSequenceError):
        psm.check(oldest)  # beyond the five retained batches: Kafka answers out-of-order too
    # a retry that overlaps but does not equal a batch is not a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        psm.check(header(1, 0, sent[2][0].base_sequence, count=1))


def test_a_duplicate_needs_the_same_epoch(psm: ProducerStateManager) -> None:
    append(psm, header(1, 2, 0, count=2), 0)
    assert psm.check(header(1, 2, 0, count=2)) is not None
    with pytest.raises(InvalidProducerEpochError):
        psm.check(header(1, 1, 0, count=2))
    assert psm.check(header(1, 3, 0, count=2)) is None  # a bumped epoch starting at 0


def test_a_stale_epoch_is_fenced(psm: ProducerStateManager) -> None:
    append(psm, header(1, 5, 0), 0)
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 5") \
            as info:
        psm.check(header(1, 4, 1))
    assert info.value.error_code == 47


def test_a_bumped_epoch_must_start_at_sequence_zero(psm: ProducerStateManager) -> None:
    offset = append(psm, header(1, 0, 0, count=3), 0)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        psm.check(header(1, 1, 3))
    offset = append(psm, header(1, 1, 0, count=2), offset)
    entry = psm.last_entry(1)
    assert entry is not None and entry.producer_epoch == 1
    assert [(b.first_seq, b.last_seq) for b in entry.batch_metadata] == [(0, 1)]  # old epoch gone
    assert psm.check(header(1, 1, 2)) is None


def test_sequence_wraps_around_at_int32_max(psm: ProducerStateManager) -> None:
    offset = append(psm, header(1, 0, INT32_MAX - 1, count=2), 0)  # ends exactly at MAX
    with pytest.raises(OutOfOrderSequenceError):
        psm.check(header(1, 0, 1))
    offset = append(psm, header(1, 0, 0, count=1), offset)  # wraps to 0
    assert psm.check(header(1, 0, 1)) is None


def test_a_batch_spanning_the_wrap_is_detected_as_duplicate(psm: ProducerStateManager) -> None:
    spanning = header(1, 0, INT32_MAX - 1, count=4)  # sequences MAX-1, MAX, 0, 1
    assert spanning.last_sequence == 1
    offset = append(psm, spanning, 10)
    dup = psm.check(spanning)
    assert dup == BatchMetadata(last_seq=1, last_offset=13, offset_delta=3, timestamp=T0)
    assert dup.first_seq == INT32_MAX - 1 and dup.first_offset == 10
    assert append(psm, header(1, 0, 2), offset) == 15


def test_decrement_sequence() -> None:
    assert decrement_sequence(10, 3) == 7
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(0, 1) == INT32_MAX


def test_batches_without_producer_id_only_move_the_map_end(psm: ProducerStateManager) -> None:
    plain = header(-1, -1, -1, count=4)
    assert psm.check(plain) is None
    psm.update(plain, 0, 3, T0)
    assert psm.is_empty and psm.map_end_offset == 4
    psm.update_map_end_offset(9)
    assert psm.map_end_offset == 9


def test_producers_are_independent(psm: ProducerStateManager) -> None:
    offset = append(psm, header(1, 0, 0), 0)
    offset = append(psm, header(2, 0, 50), offset)
    offset = append(psm, header(1, 0, 1), offset)
    assert sorted(psm.active_producers) == [1, 2]
    with pytest.raises(OutOfOrderSequenceError):
        psm.check(header(2, 0, 0))


# ---------------------------------------------------------------------- expiration
def test_expiration_follows_the_injected_clock(psm: ProducerStateManager) -> None:
    clock = ManualClock(T0)
    offset = append(psm, header(1, 0, 0, ts=clock.milliseconds()), 0)
    clock.advance(10_000)
    append(psm, header(2, 0, 0, ts=clock.milliseconds()), offset)
    clock.advance(EXPIRATION_MS - 10_000 - 1)
    assert psm.remove_expired_producers(clock.milliseconds()) == 0
    clock.advance(1)  # producer 1 idle for exactly producer.id.expiration.ms
    assert psm.remove_expired_producers(clock.milliseconds()) == 1
    assert list(psm.active_producers) == [2]
    clock.advance(10_000)
    assert psm.remove_expired_producers(clock.milliseconds()) == 1
    assert psm.is_empty
    assert psm.check(header(1, 0, 77)) is None  # forgotten: any sequence again


# ----------------------------------------------------------------------- snapshots
def fill(psm: ProducerStateManager) -> int:
    offset = 0
    for seq in range(0, 14, 2):  # seven batches of producer 1 (five retained)
        offset = append(psm, header(1, 3, seq, count=2, ts=T0 + seq), offset)
    offset = append(psm, header(9, 0, 100, count=1, ts=T0 + 50), offset)
    return offset


def test_snapshot_round_trip_keeps_all_five_batches(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    end = fill(psm)
    path = psm.take_snapshot(end)
    assert path == tmp_path / f"{end:020d}.snapshot" == producer_snapshot_file(tmp_path, end)
    assert psm.snapshot_offsets() == [end]
    assert not list(tmp_path.glob("*.tmp"))

    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    assert reloaded.snapshot_offsets() == [end]
    reloaded.load(0, end)
    assert reloaded.map_end_offset == end
    for pid in (1, 9):
        a, b = psm.last_entry(pid), reloaded.last_entry(pid)
        assert a is not None and b is not None
        assert (a.producer_epoch, a.last_timestamp, list(a.batch_metadata)) == \
               (b.producer_epoch, b.last_timestamp, list(b.batch_metadata))
    entry = reloaded.last_entry(1)
    assert entry is not None and len(entry.batch_metadata) == 5
    assert reloaded.check(header(1, 3, 4, count=2)) is not None  # the oldest retained batch
    assert reloaded.check(header(1, 3, 14)) is None


def test_snapshot_layout(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    append(psm, header(5, 2, 7, count=3, ts=T0), 20)
    path = psm.take_snapshot(23)
    assert path is not None
    data = path.read_bytes()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 2 and crc == crc32c.crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6) == (1,)
    # coordinator epoch -1 and no open transaction (-1) since version 2
    assert struct.unpack_from(">qhqiqb", data, 10) == (5, 2, T0, -1, -1, 1)
    assert struct.unpack_from(">iqiq", data, 41) == (9, 22, 2, T0)
    assert len(data) == 41 + 24
    assert read_snapshot(path)[0].producer_id == 5


def test_a_version_1_snapshot_is_still_read(tmp_path: Path) -> None:
    body = struct.pack(">i", 1) + struct.pack(">qhqb", 5, 2, T0, 1) + struct.pack(
        ">iqiq", 9, 22, 2, T0)
    path = producer_snapshot_file(tmp_path, 23)
    path.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    (entry,) = read_snapshot(path)
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq) == (5, 2, 9)
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == -1


def test_take_snapshot_only_for_a_new_offset(psm: ProducerStateManager) -> None:
    assert psm.take_snapshot() is None  # map end 0, nothing new
    end = append(psm, header(1, 0, 0), 0)
    assert psm.take_snapshot() is not None
    assert psm.take_snapshot(end) is None
    assert psm.take_snapshot(end + 5) is not None
    assert psm.snapshot_offsets() == [end, end + 5] and psm.map_end_offset == end + 5
    with pytest.raises(ValueError, match="already reflects"):
        psm.take_snapshot(end)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:7] + bytes([b[7] ^ 0x01]) + b[8:],  # a bit flip: CRC fails
        lambda b: b[:-3],  # torn write
        lambda b: b"\x00\x03" + b[2:],  # unknown version
        lambda b: b"",
        lambda b: b + b"\x00",  # trailing garbage
    ],
)
def test_a_corrupt_snapshot_is_skipped_and_deleted(tmp_path: Path, damage: object) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    offset = append(psm, header(1, 0, 0), 0)
    psm.take_snapshot(10)
    append(psm, header(1, 0, 1), 10)
    newest = psm.take_snapshot(20)
    assert newest is not None and callable(damage)
    newest.write_bytes(damage(newest.read_bytes()))

    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    reloaded.load(0, 30)
    assert reloaded.map_end_offset == 10  # the caller replays from here
    assert reloaded.snapshot_offsets() == [10] and not newest.exists()
    entry = reloaded.last_entry(1)
    assert entry is not None and entry.last_seq == 0 and offset == 1


def test_all_snapshots_corrupt_means_replay_from_log_start(tmp_path: Path) -> None:
    producer_snapshot_file(tmp_path, 40).write_bytes(b"garbage")
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    psm.load(5, 50)
    assert psm.map_end_offset == 5 and psm.is_empty and psm.snapshot_offsets() == []


def test_load_deletes_snapshots_outside_the_log(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    append(psm, header(1, 0, 0), 0)
    for offset in (10, 20, 30, 40):
        psm.take_snapshot(offset)
    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    reloaded.load(10, 35)  # 10 is at the log start, 40 above the log end
    assert reloaded.snapshot_offsets() == [20, 30]
    assert reloaded.map_end_offset == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000020.snapshot", "00000000000000000030.snapshot"]


def test_load_can_drop_producers_already_expired(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    offset = append(psm, header(1, 0, 0, ts=T0), 0)
    append(psm, header(2, 0, 0, ts=T0 + EXPIRATION_MS), offset)
    psm.take_snapshot(10)
    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    reloaded.load(0, 10, now_ms=T0 + EXPIRATION_MS)
    assert list(reloaded.active_producers) == [2]


def test_stale_tmp_files_are_removed_and_strangers_ignored(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000010.snapshot.tmp").write_bytes(b"half")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "12.snapshot").write_bytes(b"")
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    assert psm.snapshot_offsets() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000.log",
                                                          "12.snapshot"]


def test_replay_after_load_rebuilds_the_state(tmp_path: Path) -> None:
    """The loader's protocol: load, then update() every batch from map_end_offset on."""
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    log: list[tuple[BatchHeader, int]] = []
    offset = 0
    for seq in range(6):
        h = header(1, 0, seq)
        log.append((h, offset))
        offset = append(psm, h, offset)
        if offset == 3:
            psm.take_snapshot(offset)
    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    reloaded.truncate_and_reload(0, offset)
    assert reloaded.map_end_offset == 3
    for h, first in log:
        if first >= reloaded.map_end_offset:
            reloaded.update(h, first, first + h.last_offset_delta, h.max_timestamp)
    assert reloaded.map_end_offset == offset
    a, b = psm.last_entry(1), reloaded.last_entry(1)
    assert a is not None and b is not None and list(a.batch_metadata) == list(b.batch_metadata)


# ---------------------------------------------------------------------- truncation
def test_truncate_and_reload_goes_back_to_the_snapshot_below_the_end(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    offset = 0
    for seq in range(25):
        offset = append(psm, header(1, 0, seq), offset)
        if offset in (10, 20):
            psm.take_snapshot(offset)
    psm.truncate_and_reload(0, 15)
    assert psm.snapshot_offsets() == [10] and psm.map_end_offset == 10
    entry = psm.last_entry(1)
    assert entry is not None and entry.last_seq == 9


def test_truncate_and_reload_at_the_map_end_keeps_the_state(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    end = append(psm, header(1, 0, 0, count=5), 0)
    psm.take_snapshot(end)
    end = append(psm, header(1, 0, 5), end)
    psm.truncate_and_reload(2, end)  # the log start moved up; nothing truncated
    entry = psm.last_entry(1)
    assert entry is not None and entry.last_seq == 5 and psm.map_end_offset == end
    psm.truncate_and_reload(end, end)
    assert psm.snapshot_offsets() == [] and psm.map_end_offset == end  # 5 <= log start: gone
    assert psm.last_entry(1) is not None  # in-memory state is kept, as in Kafka


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    end = append(psm, header(1, 0, 0), 0)
    psm.take_snapshot(end)
    psm.truncate_fully_and_start_at(100)
    assert psm.is_empty and psm.snapshot_offsets() == [] and psm.map_end_offset == 100
    assert not list(tmp_path.iterdir())
    assert psm.take_snapshot(100) is not None  # the restarted log can snapshot at once


def test_delete_snapshots_before(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    for offset in (10, 20, 30):
        psm.take_snapshot(offset)
    psm.delete_snapshots_before(30)
    assert psm.snapshot_offsets() == [30]
    assert psm.oldest_snapshot_offset() == psm.latest_snapshot_offset() == 30
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000030.snapshot"]


def test_entry_defaults() -> None:
    entry = ProducerStateEntry(4)
    assert entry.is_empty and entry.first_seq == entry.last_seq == -1
    assert entry.first_data_offset == entry.last_data_offset == -1


def txn_header(pid: int, epoch: int, base_seq: int, count: int = 1) -> BatchHeader:
    h = header(pid, epoch, base_seq, count)
    return BatchHeader(**{**h._asdict(), "attributes": 0x10})  # transactional


def test_open_transactions_survive_a_snapshot_in_offset_order(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, EXPIRATION_MS)
    append(psm, txn_header(2, 0, 0), 10)
    append(psm, txn_header(1, 0, 0), 11)
    append(psm, txn_header(3, 0, 0), 12)
    completed = psm.update_marker(header(3, 0, -1), 13, EndTransactionMarker(
        ControlRecordType.ABORT, 7))
    assert completed is not None and completed.is_aborted
    assert (completed.first_offset, completed.last_offset, completed.last_stable_offset) == \
        (12, 13, 10)  # the earliest other open transaction
    psm.take_snapshot(14)
    reloaded = ProducerStateManager(tmp_path, EXPIRATION_MS)
    reloaded.load(0, 14)
    assert list(reloaded.ongoing_transactions.items()) == [(2, 10), (1, 11)]
    assert reloaded.first_unstable_offset == 10
    entry = reloaded.last_entry(3)
    assert entry is not None and entry.coordinator_epoch == 7 and not entry.in_transaction
