"""ReplicaManager: hosting partitions, append results per partition, fetch limits, long poll."""

from __future__ import annotations

import asyncio
from pathlib import Path

from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.partition_results import PartitionFetchInfo
from strata.broker.replication.replica_manager import ReplicaManager

from .helpers import TOPIC_ID, batch, replica_manager

HW = FetchIsolation.HIGH_WATERMARK


async def fetch(rm: ReplicaManager, *infos: tuple[tuple[str, int], int, int], max_wait_ms: int = 0,
                min_bytes: int = 1, max_bytes: int = 1 << 20,
                isolation: FetchIsolation = HW) -> list:  # type: ignore[type-arg]
    fetch_infos = [(tp, PartitionFetchInfo(offset, limit)) for tp, offset, limit in infos]
    return await rm.fetch_messages(fetch_infos, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                   max_bytes=max_bytes, isolation=isolation)


def test_make_leader_creates_the_log_and_is_idempotent(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path)
    p = rm.make_leader("t", 0, TOPIC_ID, 0, configs={"retention.ms": "1000"})
    assert (tmp_path / "data" / "t-0").is_dir()
    assert p.log.config.retention_ms == 1000
    assert rm.make_leader("t", 0, TOPIC_ID, 2) is p and p.leader_epoch == 2
    assert rm.get_partition("t", 0) is p and rm.partitions() == [p]
    assert rm.remove_partition("t", 0) is p
    assert rm.get_partition("t", 0) is None and (tmp_path / "data" / "t-0").is_dir()
    rm.make_leader("t", 0, TOPIC_ID, 3)
    rm.remove_partition("t", 0, delete_log=True)
    assert not (tmp_path / "data" / "t-0").exists()


async def test_append_results_per_partition(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 2))
    bad = bytearray(batch(b"x"))
    bad[-1] ^= 1
    results = await rm.append_records(
        [(("t", 0), batch(b"a", b"b")), (("t", 1), batch(b"c")), (("nope", 0), batch(b"d")),
         (("t", 0), bytes(bad)), (("t", 0), batch(b"e"))], required_acks=1, timeout_ms=100)
    assert [r.error_code for r in results] == [0, 0, 3, 2, 0]
    assert [r.base_offset for r in results] == [0, 0, -1, -1, 2]
    assert results[0].log_append_time == -1 and results[0].log_start_offset == 0
    assert results[3].error_message and "CRC" in results[3].error_message


async def test_invalid_acks(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    results = await rm.append_records([(("t", 0), batch(b"a"))], required_acks=2, timeout_ms=1)
    assert results[0].error_code == 21
    assert rm.get_partition("t", 0).log_end_offset == 0  # type: ignore[union-attr]


async def test_log_append_time_is_reported(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path)
    rm.make_leader("t", 0, TOPIC_ID, 0, configs={"message.timestamp.type": "LogAppendTime"})
    (result,) = await rm.append_records([(("t", 0), batch(b"a"))], 1, 100)
    assert result.error_code == 0 and result.log_append_time > 0


async def test_idempotent_duplicates_get_the_original_offsets(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    first = batch(b"a", b"b", producer_id=7, producer_epoch=0, base_sequence=0)
    second = batch(b"c", producer_id=7, producer_epoch=0, base_sequence=2)
    r1, r2, dup, gap, fenced = await rm.append_records(
        [(("t", 0), first), (("t", 0), second), (("t", 0), first),
         (("t", 0), batch(b"z", producer_id=7, producer_epoch=0, base_sequence=9)),
         (("t", 0), batch(b"z", producer_id=7, producer_epoch=-1 & 0x7FFF, base_sequence=5))],
        1, 100)
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 2)
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert fenced.error_code == 45  # a new epoch must start at sequence 0
    assert rm.get_partition("t", 0).log_end_offset == 3  # type: ignore[union-attr]
    (old_epoch,) = await rm.append_records(
        [(("t", 0), batch(b"q", producer_id=7, producer_epoch=0, base_sequence=3))], 1, 100)
    assert old_epoch.error_code == 0
    rm.get_partition("t", 0).log.producer_state.last_entry(7).producer_epoch = 5  # type: ignore[union-attr]
    (stale,) = await rm.append_records(
        [(("t", 0), batch(b"q", producer_id=7, producer_epoch=0, base_sequence=4))], 1, 100)
    assert stale.error_code == 47  # INVALID_PRODUCER_EPOCH


async def test_not_enough_replicas_for_acks_all(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1), min_insync_replicas="2")
    (r,) = await rm.append_records([(("t", 0), batch(b"a"))], -1, 100)
    assert r.error_code == 19
    (r,) = await rm.append_records([(("t", 0), batch(b"a"))], 1, 100)
    assert r.error_code == 0


async def test_storage_error_is_kafka_storage_error(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    rm.get_partition("t", 0).log.offline = True  # type: ignore[union-attr]
    (r,) = await rm.append_records([(("t", 0), batch(b"a"))], 1, 100)
    assert r.error_code == 56
    (f,) = await fetch(rm, (("t", 0), 0, 100))
    assert f.error_code == 56 and f.high_watermark == -1


async def test_fetch_limits_and_kip74(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 3))
    one = batch(b"x" * 200)
    for p in range(3):
        await rm.append_records([(("t", p), one), (("t", p), one)], 1, 100)
    size = len(one)
    # per-partition max bytes below one batch: the first partition still gets a whole batch,
    # later ones nothing rather than part of a batch (Kafka's readFromLog, Fetch v3+)
    results = await fetch(rm, (("t", 0), 0, 10), (("t", 1), 0, 10))
    assert [r.size for r in results] == [size, 0]
    # the request's max_bytes is shared across partitions
    results = await fetch(rm, (("t", 0), 0, 10_000), (("t", 1), 0, 10_000), (("t", 2), 0, 10_000),
                          max_bytes=size * 3)
    assert [r.size for r in results] == [2 * size, size, 0]
    assert [r.high_watermark for r in results] == [2, 2, 2]
    assert results[0].records[0].read_bytes()[:8] == (0).to_bytes(8, "big")


async def test_fetch_errors(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    await rm.append_records([(("t", 0), batch(b"a"))], 1, 100)
    unknown, out_of_range, fine = await fetch(rm, (("x", 0), 0, 100), (("t", 0), 5, 100),
                                              (("t", 0), 0, 100), max_wait_ms=5000)
    assert (unknown.error_code, out_of_range.error_code, fine.error_code) == (3, 1, 0)
    assert (out_of_range.high_watermark, out_of_range.log_start_offset) == (-1, -1)
    assert fine.size > 0


async def test_long_poll_is_woken_by_an_append(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 2))
    loop = asyncio.get_running_loop()
    start = loop.time()
    task = asyncio.create_task(fetch(rm, (("t", 0), 0, 1000), (("t", 1), 0, 1000),
                                     max_wait_ms=10_000))
    await asyncio.sleep(0.02)
    assert not task.done() and len(rm.fetch_purgatory) == 1
    await rm.append_records([(("t", 1), batch(b"a"))], 1, 100)
    results = await asyncio.wait_for(task, 2)
    assert loop.time() - start < 2
    assert [r.size for r in results] == [0, len(batch(b"a"))]
    assert len(rm.fetch_purgatory) == 0


async def test_long_poll_waits_for_min_bytes_then_expires(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    one = len(batch(b"a"))
    task = asyncio.create_task(fetch(rm, (("t", 0), 0, 1 << 20), max_wait_ms=300,
                                     min_bytes=3 * one))
    await asyncio.sleep(0.02)
    await rm.append_records([(("t", 0), batch(b"a"))], 1, 100)
    await asyncio.sleep(0.02)
    assert not task.done()  # one batch is below min_bytes
    await rm.append_records([(("t", 0), batch(b"b"))], 1, 100)
    (result,) = await asyncio.wait_for(task, 2)  # expires with what is there
    assert result.size == 2 * one and result.high_watermark == 2


async def test_long_poll_expires_empty(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    loop = asyncio.get_running_loop()
    start = loop.time()
    (result,) = await fetch(rm, (("t", 0), 0, 100), max_wait_ms=100)
    assert 0.09 <= loop.time() - start < 1
    assert result.error_code == 0 and result.size == 0 and result.high_watermark == 0


async def test_removed_partition_wakes_its_fetches(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    task = asyncio.create_task(fetch(rm, (("t", 0), 0, 100), max_wait_ms=10_000))
    await asyncio.sleep(0.01)
    rm.remove_partition("t", 0)
    (result,) = await asyncio.wait_for(task, 2)
    assert result.error_code == 3


async def test_follower_reads_to_the_log_end(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    await rm.append_records([(("t", 0), batch(b"a")), (("t", 0), batch(b"b"))], 1, 100)
    rm.get_partition("t", 0).log.update_high_watermark(1)  # type: ignore[union-attr]
    (consumer,) = await fetch(rm, (("t", 0), 0, 1 << 20))
    (follower,) = await fetch(rm, (("t", 0), 0, 1 << 20), isolation=FetchIsolation.LOG_END)
    assert follower.size == 2 * consumer.size


async def test_delete_records(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    part = rm.get_partition("t", 0)
    assert part is not None
    for v in (b"a", b"b"):
        part.append_records_to_leader(batch(v), 1)
    results = await rm.delete_records(
        [(("t", 0), 1), (("x", 0), 0), (("t", 0), 9), (("t", 0), -1)], 0)
    assert [(r.error_code, r.low_watermark) for r in results] == [(0, 1), (3, -1), (1, -1),
                                                                   (0, 2)]
