"""A replica fetcher in its steady state (``replica_fetcher``, module docstring): once every
partition is fetched in an open session, a round recomputes only the positions that may have
moved and asks with ``FetchSessionHandler.build_changes``; the requests are those a full
recomputation would send. Broker 1 (a ``KafkaServer`` in process, loopback) leads t-0..7 with
replicas 1 and 2; broker 2 is a ``ReplicaManager`` whose fetcher follows it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

from strata.broker.replication.replica_fetcher import (
    FULL_REBUILD_INTERVAL_S,
    FetcherConfig,
    LeaderEndpoint,
    ReplicaFetcherManager,
)
from strata.broker.replication.replica_manager import ReplicaManager
from strata.client.fetch_codec import FetchPosition
from strata.client.fetch_session_handler import FetchRequestData, FetchSessionHandler
from strata.storage.clock import SystemClock

from .helpers import batch, log_manager, started_leader

PARTITIONS = 8
WAIT_S = 10.0
FAST = FetcherConfig(wait_max_ms=50, backoff_ms=50, socket_timeout_ms=5_000)
TopicPartition = tuple[str, int]


class RecordingSession(FetchSessionHandler):
    """The fetcher's session, recording how each request was built and what it named."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, list[int]]] = []

    def build(self, wanted: Mapping[TopicPartition, FetchPosition]) -> FetchRequestData:
        request = super().build(wanted)
        self.requests.append(("full" if request.full else "build",
                              [p.partition for p in request.to_send]))
        return request

    def build_changes(self, changed: Mapping[TopicPartition, FetchPosition]
                      ) -> FetchRequestData:
        request = super().build_changes(changed)
        self.requests.append(("changes", [p.partition for p in request.to_send]))
        return request


class Leader(NamedTuple):
    rm: ReplicaManager
    endpoint: LeaderEndpoint


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    server = await started_leader(tmp_path, PARTITIONS)
    assert server.state is not None
    rm = server.state.replica_manager
    for index in range(PARTITIONS):
        partition = rm.get_partition("t", index)
        assert partition is not None
        rm.make_leader("t", index, partition.topic_id, 0, replicas=(1, 2),
                       isr=frozenset({1, 2}))
    yield Leader(rm, LeaderEndpoint(1, "127.0.0.1", server.kafka_port))
    await server.shutdown()


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def follow(leader: Leader, tmp_path: Path, indexes: range
                 ) -> tuple[ReplicaManager, ReplicaFetcherManager, RecordingSession]:
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    for index in indexes:
        partition = leader.rm.get_partition("t", index)
        assert partition is not None
        follower.make_follower("t", index, partition.topic_id, 1, 0, replicas=(1, 2),
                               isr=frozenset({1, 2}), partition_epoch=0)
    manager = ReplicaFetcherManager(follower, FAST)
    manager.add_partitions({("t", index): (leader.endpoint, 0) for index in indexes})
    (fetcher,) = manager.fetchers.values()
    session = fetcher.session = RecordingSession()  # before its first round
    return follower, manager, session


async def test_a_steady_fetcher_names_only_the_partitions_written(
        leader: Leader, tmp_path: Path) -> None:
    follower, manager, session = await follow(leader, tmp_path, range(PARTITIONS))
    try:
        await until(lambda: any(kind == "changes" for kind, _ in session.requests),
                    "a steady round")
        seen = len(session.requests)
        for index in (3, 6):
            (result,) = await leader.rm.append_records([(("t", index), batch(b"v"))], -1,
                                                       10_000)
            assert result.error_code == 0  # acks=-1: the follower fetched it
        await until(lambda: all(
            (p := follower.get_partition("t", i)) is not None and p.high_watermark == 1
            for i in (3, 6)), "the follower to learn both HWs")
        later = session.requests[seen:]
        assert later and {kind for kind, _ in later} <= {"changes", "full"}
        named = {index for kind, indexes in later if kind == "changes" for index in indexes}
        assert named == {3, 6}  # each written partition once it moved; nothing else
    finally:
        await manager.shutdown()


async def test_a_log_start_moved_here_is_reported_by_the_next_full_round(
        leader: Leader, tmp_path: Path) -> None:
    for index in range(PARTITIONS):
        for value in (b"a", b"b"):
            (result,) = await leader.rm.append_records([(("t", index), batch(value))], 1,
                                                       10_000)
            assert result.error_code == 0
    follower, manager, session = await follow(leader, tmp_path, range(PARTITIONS))
    try:
        mine = follower.get_partition("t", 5)
        theirs = leader.rm.get_partition("t", 5)
        assert mine is not None and theirs is not None
        await until(lambda: mine.high_watermark == 2, "the follower to catch up")
        await until(lambda: any(kind == "changes" for kind, _ in session.requests),
                    "a steady round")
        mine.log.delete_records_before(1)  # as this broker's own retention would
        started = time.monotonic()
        await until(lambda: theirs.followers[2].log_start_offset == 1,
                    "the leader to hear the follower's new log start")
        assert time.monotonic() - started < FULL_REBUILD_INTERVAL_S + WAIT_S / 2
    finally:
        await manager.shutdown()


async def test_a_partition_added_to_a_steady_fetcher_is_fetched(
        leader: Leader, tmp_path: Path) -> None:
    follower, manager, session = await follow(leader, tmp_path, range(PARTITIONS - 1))
    try:
        await until(lambda: any(kind == "changes" for kind, _ in session.requests),
                    "a steady round")
        (result,) = await leader.rm.append_records([(("t", 7), batch(b"late"))], 1, 10_000)
        assert result.error_code == 0
        last = leader.rm.get_partition("t", 7)
        assert last is not None
        follower.make_follower("t", 7, last.topic_id, 1, 0, replicas=(1, 2),
                               isr=frozenset({1, 2}), partition_epoch=0)
        manager.add_partitions({("t", 7): (leader.endpoint, 0)})
        mine = follower.get_partition("t", 7)
        assert mine is not None
        await until(lambda: mine.log_end_offset == 1, "the new partition to be replicated")
    finally:
        await manager.shutdown()
