"""MetadataPublisher: a broker leads only what the image gives it under its current broker
epoch — a previous incarnation's leadership leaves the partition leaderless here."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any, cast

from strata.broker.cluster.image import (
    BrokerRegistration,
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from strata.broker.cluster.metadata_publisher import MetadataPublisher, read_partition_topic_id
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.replication.replica_fetcher import LeaderEndpoint, ReplicaFetcherManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.storage.clock import SystemClock

from .helpers import TOPIC_ID, batch, log_manager

NODE = 1
EPOCH = 50  # this incarnation's broker epoch
TOPIC_ID_NEW = uuid.UUID(int=0xBEEF)


class Fetchers:
    """Records what the publisher asks the fetcher manager to do."""

    def __init__(self) -> None:
        self.fetching: dict[tuple[str, int], tuple[LeaderEndpoint, int]] = {}

    def add_partitions(self, partitions: dict[tuple[str, int], tuple[LeaderEndpoint, int]]
                       ) -> None:
        self.fetching.update(partitions)

    def remove_partitions(self, tps: list[tuple[str, int]]) -> None:
        for tp in tps:
            self.fetching.pop(tp, None)


def image(leader: int, leader_broker_epoch: int, *, leader_epoch: int = 7) -> ClusterImage:
    brokers = {i: BrokerRegistration(i, "127.0.0.1", 9090 + i, None, EPOCH if i == NODE else 9)
               for i in (1, 2, 3)}
    registration = PartitionRegistration(TOPIC_ID, (1, 2, 3), (1, 2, 3), leader, leader_epoch,
                                         leader_broker_epoch, 4)
    return ClusterImage(revision=1, brokers=brokers,
                        topics={"t": TopicRegistration("t", TOPIC_ID, 3)},
                        partitions={("t", 0): registration},
                        partition_versions={("t", 0): 1})


def publisher(tmp_path: Path) -> tuple[MetadataPublisher, ReplicaManager, Fetchers]:
    clock = SystemClock()
    lm = log_manager(tmp_path, clock)
    log = lm.get_or_create_log("t", 0)
    log.append_as_leader(batch(b"acked", b"not replicated"), leader_epoch=6)
    rm = ReplicaManager(lm, clock, node_id=NODE)
    fetchers = Fetchers()
    pub = MetadataPublisher(NODE, rm, cast(ReplicaFetcherManager, fetchers), lm,
                            cast(GroupCoordinator, cast(Any, object())),
                            broker_epoch=lambda: EPOCH, on_configs=lambda image: None)
    return pub, rm, fetchers


def test_leadership_of_a_previous_incarnation_is_not_exercised(tmp_path: Path) -> None:
    pub, rm, fetchers = publisher(tmp_path)
    asyncio.run(pub.publish(image(leader=NODE, leader_broker_epoch=EPOCH - 1)))
    hosted = rm.get_partition("t", 0)
    assert hosted is not None
    assert not hosted.is_leader and hosted.leader_id is None
    assert hosted.high_watermark == 0  # the unreplicated tail is not committed
    assert ("t", 0) not in fetchers.fetching  # nobody to fetch from: leaderless
    # The controller's election at a new leader epoch under this incarnation's epoch: leader.
    asyncio.run(pub.publish(image(leader=NODE, leader_broker_epoch=EPOCH, leader_epoch=8)))
    assert hosted.is_leader and hosted.leader_epoch == 8
    assert hosted.high_watermark == 0  # waits for the followers in the ISR


def test_another_leader_is_followed(tmp_path: Path) -> None:
    pub, rm, fetchers = publisher(tmp_path)
    asyncio.run(pub.publish(image(leader=2, leader_broker_epoch=9)))
    hosted = rm.get_partition("t", 0)
    assert hosted is not None and not hosted.is_leader and hosted.leader_id == 2
    endpoint, epoch = fetchers.fetching[("t", 0)]
    assert (endpoint.node_id, endpoint.port, epoch) == (2, 9092, 7)


def test_a_new_topics_logs_are_created_off_the_event_loop(tmp_path: Path) -> None:
    """The file work of partitions new to this broker (the log, ``partition.metadata``) runs
    in a worker thread before they are hosted, so the loop keeps serving meanwhile."""
    pub, rm, _ = publisher(tmp_path)
    lm = pub.log_manager
    threads: dict[tuple[str, int], int] = {}
    create = lm.get_or_create_log

    def recording(topic: str, partition: int, overrides: Any = None) -> Any:
        threads.setdefault((topic, partition), threading.get_ident())
        return create(topic, partition, overrides)

    lm.get_or_create_log = recording  # type: ignore[method-assign]
    base = image(leader=NODE, leader_broker_epoch=EPOCH)
    registration = PartitionRegistration(TOPIC_ID_NEW, (1, 2, 3), (1, 2, 3), NODE, 0, EPOCH, 0)
    grown = ClusterImage(
        revision=2, brokers=base.brokers,
        topics={**base.topics, "new": TopicRegistration("new", TOPIC_ID_NEW, 3)},
        partitions={**base.partitions, **{("new", i): registration for i in range(3)}},
        partition_versions={**base.partition_versions, **{("new", i): 1 for i in range(3)}})

    async def publish() -> int:
        await pub.publish(grown)
        return threading.get_ident()

    loop_thread = asyncio.run(publish())
    # First asked for in a worker thread, so created there; ("t", 0) had its log: the loop
    # only looks it up when hosting it.
    assert all(threads[("new", i)] != loop_thread for i in range(3))
    assert threads[("t", 0)] == loop_thread
    for i in range(3):
        hosted = rm.get_partition("new", i)
        assert hosted is not None and hosted.is_leader
        assert read_partition_topic_id(Path(hosted.log.dir)) == TOPIC_ID_NEW
