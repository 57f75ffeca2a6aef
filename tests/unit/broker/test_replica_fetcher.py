"""Replica fetcher against a leader broker served in process on loopback.

Broker 1 (a ``KafkaServer``) leads t-0 with replicas 1 and 2; broker 2 is a ``ReplicaManager``
of its own whose ``ReplicaFetcherManager`` follows it. Checked: acks=-1 produces to the leader
complete once the follower fetched them, the follower's log is byte-for-byte the leader's and
learns the HW; a follower with a divergent tail from an old epoch truncates it (KIP-101) and
ends up identical; a follower behind the leader's log start restarts there; a follower moves
its log start up to the leader's (``LeaderOffsetIncremented``) and reports it, so DeleteRecords
on a leader with two followers is answered once both have dropped the records.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.replication.partition import Partition
from strata.broker.replication.replica_fetcher import (
    FetcherConfig,
    LeaderEndpoint,
    ReplicaFetcherManager,
)
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.server import KafkaServer
from strata.storage.clock import SystemClock
from strata.storage.record_batch import whole_batches

from .helpers import batch, log_manager, started_leader

TP = ("t", 0)
WAIT_S = 10.0
FAST = FetcherConfig(wait_max_ms=50, backoff_ms=50, socket_timeout_ms=5_000)


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[KafkaServer]:
    server = await started_leader(tmp_path, 1)
    yield server
    await server.shutdown()


def state_of(server: KafkaServer) -> BrokerState:
    assert server.state is not None
    return server.state


def hosted(rm: ReplicaManager) -> Partition:
    found = rm.get_partition(*TP)
    assert found is not None
    return found


def log_bytes(partition: Partition) -> bytes:
    return partition.log.read(partition.log.log_start_offset, 1 << 30, None, True).read_bytes()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` on the loop (the fetcher runs between polls) against a deadline."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def append(rm: ReplicaManager, acks: int, *values: bytes) -> list[int]:
    codes = []
    for value in values:
        (result,) = await rm.append_records([(TP, batch(value))], acks, 10_000)
        codes.append(result.error_code)
    return codes


def lead(server: KafkaServer, epoch: int, replicas: tuple[int, ...] = (1, 2)
         ) -> ReplicaManager:
    rm = state_of(server).replica_manager
    rm.make_leader("t", 0, hosted(rm).topic_id, epoch, replicas=replicas,
                   isr=frozenset(replicas))
    return rm


async def follow(follower: ReplicaManager, server: KafkaServer, epoch: int,
                 replicas: tuple[int, ...] = (1, 2)) -> ReplicaFetcherManager:
    topic_id = hosted(state_of(server).replica_manager).topic_id
    follower.make_follower("t", 0, topic_id, 1, epoch, replicas=replicas,
                           isr=frozenset(replicas), partition_epoch=0)
    manager = ReplicaFetcherManager(follower, FAST)
    manager.add_partitions({TP: (LeaderEndpoint(1, "127.0.0.1", server.kafka_port), epoch)})
    return manager


async def test_follower_replicates_and_acks_all_completes(leader: KafkaServer,
                                                          tmp_path: Path) -> None:
    leader_rm = lead(leader, 0)
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    fetchers = await follow(follower, leader, 0)
    try:
        assert await append(leader_rm, -1, b"a", b"b", b"c") == [0, 0, 0]
        leader_part, follower_part = hosted(leader_rm), hosted(follower)
        assert leader_part.high_watermark == 3
        await until(lambda: follower_part.high_watermark == 3, "the follower to learn the HW")
        assert log_bytes(follower_part) == log_bytes(leader_part)
        assert follower_part.log.latest_epoch == 0
    finally:
        await fetchers.shutdown()


async def test_divergent_tail_is_truncated(leader: KafkaServer, tmp_path: Path) -> None:
    leader_rm = lead(leader, 0)
    await append(leader_rm, 1, b"a", b"b", b"c")  # epoch 0: offsets 0-2 (no follower yet)
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    follower.make_leader("t", 0, hosted(leader_rm).topic_id, 0)  # it led epoch 0 once ...
    hosted(follower).log.append_as_follower(log_bytes(hosted(leader_rm)))  # ... with 0-2 ...
    assert await append(follower, 1, b"lost-1", b"lost-2") == [0, 0]  # ... and 3-4 alone
    leader_rm = lead(leader, 1)  # broker 1 leads epoch 1 and writes 3-5
    assert await append(leader_rm, 1, b"x", b"y", b"z") == [0, 0, 0]
    fetchers = await follow(follower, leader, 1)
    try:
        follower_part, leader_part = hosted(follower), hosted(leader_rm)
        await until(lambda: follower_part.log_end_offset == 6 and
                    follower_part.log.latest_epoch == 1, "the follower to truncate and catch up")
        assert log_bytes(follower_part) == log_bytes(leader_part)
        assert b"lost-1" not in log_bytes(follower_part)
        assert [(e.epoch, e.start_offset) for e in
                follower_part.log.leader_epoch_cache.epoch_entries()] == [(0, 0), (1, 3)]
    finally:
        await fetchers.shutdown()


async def test_follower_behind_the_log_start_restarts_there(leader: KafkaServer,
                                                            tmp_path: Path) -> None:
    leader_rm = lead(leader, 0)
    await append(leader_rm, 1, b"a", b"b", b"c", b"d")
    leader_part = hosted(leader_rm)
    leader_part.log.update_high_watermark(4)
    leader_part.delete_records_on_leader(2)  # the leader's log now starts at 2
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    fetchers = await follow(follower, leader, 0)
    try:
        follower_part = hosted(follower)
        await until(lambda: follower_part.log_end_offset == 4, "the follower to catch up")
        assert follower_part.log.log_start_offset == 2
    finally:
        await fetchers.shutdown()


async def test_follower_moves_its_log_start_to_the_leaders(leader: KafkaServer,
                                                          tmp_path: Path) -> None:
    leader_rm = lead(leader, 0)
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    fetchers = await follow(follower, leader, 0)
    try:
        assert await append(leader_rm, -1, b"a", b"b", b"c", b"d") == [0, 0, 0, 0]
        leader_part, follower_part = hosted(leader_rm), hosted(follower)
        await until(lambda: follower_part.high_watermark == 4, "the follower to catch up")
        leader_part.delete_records_on_leader(2)
        await until(lambda: follower_part.log.log_start_offset == 2,
                    "the follower to move its log start to the leader's")
        assert follower_part.log_end_offset == 4  # moved, not restarted empty at 2
        assert log_bytes(follower_part) == log_bytes(leader_part)
        await until(lambda: leader_part.followers[2].log_start_offset == 2,
                    "the follower to report its log start to the leader")
    finally:
        await fetchers.shutdown()


async def test_delete_records_answered_once_both_followers_dropped_the_records(
        leader: KafkaServer, tmp_path: Path) -> None:
    leader_rm = lead(leader, 0, replicas=(1, 2, 3))
    followers = [ReplicaManager(log_manager(tmp_path / f"f{node}"), SystemClock(), node)
                 for node in (2, 3)]
    managers = [await follow(follower, leader, 0, replicas=(1, 2, 3)) for follower in followers]
    try:
        assert await append(leader_rm, -1, b"a", b"b", b"c") == [0, 0, 0]
        (result,) = await asyncio.wait_for(leader_rm.delete_records([(TP, 2)], 10_000), WAIT_S)
        assert (result.error_code, result.low_watermark) == (0, 2)
        # Answered only once each follower had moved its own log start and reported it.
        assert [hosted(f).log.log_start_offset for f in followers] == [2, 2]
        assert {r: s.log_start_offset for r, s in hosted(leader_rm).followers.items()} == {
            2: 2, 3: 2}
    finally:
        for manager in managers:
            await manager.shutdown()


def test_whole_batches_cuts_a_partial_trailing_batch() -> None:
    one, two = batch(b"first"), batch(b"second")
    assert bytes(whole_batches(one + two[:-3])) == one
    assert bytes(whole_batches(one + two)) == one + two
    assert bytes(whole_batches(two[:10])) == b""
