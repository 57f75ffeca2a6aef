"""MetadataPublisher: a broker leads only what the image gives it under its current broker
epoch — a previous incarnation's leadership leaves the partition leaderless here."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from strata.broker.cluster.image import (
    BrokerRegistration,
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from strata.broker.cluster.metadata_publisher import MetadataPublisher
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.replication.replica_fetcher import LeaderEndpoint, ReplicaFetcherManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.storage.clock import SystemClock

from .helpers import TOPIC_ID, batch, log_manager

NODE = 1
EPOCH = 50  # this incarnation's broker epoch


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
