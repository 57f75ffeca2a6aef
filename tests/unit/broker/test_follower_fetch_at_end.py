"""A follower fetching from the leader's log end is answered without a log read, and the answer
is exactly what the read would give: the high watermark (the one its own fetch may just have
moved), the last stable offset, the log start offset, no records — and its fetch state recorded.
Anything else (a stale leader epoch, an unknown replica, an offline log) still goes through the
read and gets its error."""

from __future__ import annotations

import uuid
from pathlib import Path

from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.partition_results import FetchPartitionResult, PartitionFetchInfo
from strata.broker.replication.replica_manager import ReplicaManager
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock
from strata.storage.log_transactions import AppendOrigin
from strata.storage.records import RecordSpec, build_batch

from .helpers import batch, log_manager

TP = ("t", 0)
LEADER_EPOCH = 3


def _leader(tmp_path: Path, clock: ManualClock) -> ReplicaManager:
    rm = ReplicaManager(log_manager(tmp_path, clock), clock, node_id=1)
    rm.make_leader("t", 0, uuid.UUID(int=5), LEADER_EPOCH, replicas=(1, 2, 3),
                   isr=frozenset({1, 2, 3}))
    return rm


async def _follower_fetch(rm: ReplicaManager, replica: int, offset: int,
                          epoch: int = LEADER_EPOCH) -> FetchPartitionResult:
    (result,) = await rm.fetch_messages([(TP, PartitionFetchInfo(offset, 1 << 20, epoch))],
                                        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                        isolation=FetchIsolation.LOG_END, replica_id=replica)
    return result


def _as_read(rm: ReplicaManager, offset: int) -> FetchPartitionResult:
    """What ``Partition.read_records`` answers for ``offset`` now (the slow path's source)."""
    partition = rm.get_partition(*TP)
    assert partition is not None
    read = partition.read_records(offset, 1 << 20, FetchIsolation.LOG_END, True, LEADER_EPOCH)
    return FetchPartitionResult(ErrorCode.none, read.high_watermark, read.last_stable_offset,
                                read.log_start_offset, read.slices, read.size,
                                read.aborted_transactions)


async def test_at_the_end_the_answer_is_the_reads_and_the_fetch_state_is_recorded(
        tmp_path: Path) -> None:
    clock = ManualClock()
    rm = _leader(tmp_path, clock)
    records = batch(b"a", b"b", b"c", timestamp=clock.milliseconds())
    await rm.append_records([(TP, records)], 1, 1000)
    partition = rm.get_partition(*TP)
    assert partition is not None
    end = partition.log_end_offset
    assert end == 3 and partition.high_watermark == 0

    clock.advance(50)
    first = await _follower_fetch(rm, 2, end)  # broker 3 has not fetched: the HW stays
    assert first == _as_read(rm, end)
    assert (first.high_watermark, first.records, first.size) == (0, (), 0)
    state = partition.followers[2]
    assert (state.log_end_offset, state.last_caught_up_ms) == (end, clock.milliseconds())

    second = await _follower_fetch(rm, 3, end)  # the last of the ISR: its fetch moves the HW
    assert partition.high_watermark == end
    assert second == _as_read(rm, end)
    assert (second.high_watermark, second.last_stable_offset) == (end, end)


async def test_an_open_transaction_holds_the_last_stable_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    rm = _leader(tmp_path, clock)
    partition = rm.get_partition(*TP)
    assert partition is not None
    await rm.append_records([(TP, batch(b"plain", timestamp=clock.milliseconds()))], 1, 1000)
    open_txn = build_batch([RecordSpec(key=b"k", value=b"v", timestamp=clock.milliseconds())],
                           producer_id=7, producer_epoch=0, base_sequence=0,
                           is_transactional=True)
    partition.log.append_as_leader(open_txn, LEADER_EPOCH, AppendOrigin.REPLICATION)
    end = partition.log_end_offset
    for replica in (2, 3):
        result = await _follower_fetch(rm, replica, end)
    assert partition.high_watermark == end
    assert result == _as_read(rm, end)
    assert result.last_stable_offset == 1  # the transaction's first offset, below the HW


async def test_errors_still_come_from_the_read(tmp_path: Path) -> None:
    clock = ManualClock()
    rm = _leader(tmp_path, clock)
    await rm.append_records([(TP, batch(b"a", timestamp=clock.milliseconds()))], 1, 1000)
    partition = rm.get_partition(*TP)
    assert partition is not None
    end = partition.log_end_offset
    fenced = await _follower_fetch(rm, 2, end, epoch=LEADER_EPOCH - 1)
    assert fenced.error_code == ErrorCode.fenced_leader_epoch
    unknown_epoch = await _follower_fetch(rm, 2, end, epoch=LEADER_EPOCH + 1)
    assert unknown_epoch.error_code == ErrorCode.unknown_leader_epoch
    stranger = await _follower_fetch(rm, 9, end)
    assert stranger.error_code == ErrorCode.not_leader_or_follower
    partition.log.offline = True
    offline = await _follower_fetch(rm, 2, end)
    assert offline.error_code == ErrorCode.kafka_storage_error
