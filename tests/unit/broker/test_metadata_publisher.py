"""MetadataPublisher: a broker leads only what the image gives it under its current broker
epoch — a previous incarnation's leadership leaves the partition leaderless here; an image
built from the one applied last is applied for the partitions it changed (and those that
failed before), with the same outcome as a full comparison."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from strata.broker.cluster import image as ci
from strata.broker.cluster.image import (
    BrokerRegistration,
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from strata.broker.cluster.image_builder import ImageBuilder
from strata.broker.cluster.metadata_publisher import MetadataPublisher, read_partition_topic_id
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.replication.replica_fetcher import LeaderEndpoint, ReplicaFetcherManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.storage.clock import SystemClock
from strata.storage.errors import StorageError

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


# ----------------------------------------------------------------------------- deltas
class Coordinator:
    """Records the partitions whose committed offsets the publisher has groups forget."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, int]] = []

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.deleted += partitions


def _registration(topic_id: uuid.UUID, leader: int, *, epoch: int = 1) -> bytes:
    broker_epoch = EPOCH if leader == NODE else 9
    return PartitionRegistration(topic_id, (1, 2, 3), (1, 2, 3), leader, epoch, broker_epoch,
                                 epoch).encode()


def delta_setup(tmp_path: Path, topics: dict[str, int]
                ) -> tuple[MetadataPublisher, ReplicaManager, ImageBuilder, Coordinator]:
    """A publisher that applied the builder's first image: ``topics`` (name -> partition
    count), every partition led by broker 2 and followed here."""
    pub, rm, _ = publisher(tmp_path)
    coordinator = Coordinator()
    pub.group_coordinator = cast(GroupCoordinator, coordinator)
    entries = {ci.broker_key(i): (BrokerRegistration(i, "127.0.0.1", 9090 + i).encode(),
                                  EPOCH if i == NODE else 9) for i in (1, 2, 3)}
    for n, (name, count) in enumerate(topics.items()):
        topic_id = TOPIC_ID if name == "t" else uuid.UUID(int=n + 1)
        entries[ci.topic_key(name)] = (TopicRegistration(name, topic_id, 3).encode(), 20)
        for i in range(count):
            entries[ci.partition_key(name, i)] = (_registration(topic_id, 2), 21)
    builder = ImageBuilder()
    asyncio.run(pub.publish(builder.load(entries, 30)))
    return pub, rm, builder, coordinator


def test_a_delta_applies_the_partitions_it_changed_and_looks_at_no_other(
        tmp_path: Path) -> None:
    pub, rm, builder, _ = delta_setup(tmp_path, {"t": 4})
    looked_up: list[tuple[str, int]] = []
    get_partition = rm.get_partition

    def recording(topic: str, index: int) -> Any:
        looked_up.append((topic, index))
        return get_partition(topic, index)

    rm.get_partition = recording  # type: ignore[method-assign]
    builder.put(ci.partition_key("t", 1), _registration(TOPIC_ID, NODE, epoch=2), 31)
    asyncio.run(pub.publish(builder.build(31)))
    leader = get_partition("t", 1)
    assert leader is not None and leader.is_leader and leader.leader_epoch == 2
    assert set(looked_up) == {("t", 1)}  # the other 3 partitions were not even looked up
    others = [get_partition("t", i) for i in (0, 2, 3)]
    assert all(p is not None and p.leader_id == 2 for p in others)


def test_a_partition_that_failed_is_retried_on_deltas_that_do_not_change_it(
        tmp_path: Path) -> None:
    pub, rm, builder, _ = delta_setup(tmp_path, {"t": 3})
    attempts: list[int] = []
    make_leader = rm.make_leader

    def failing(topic: str, index: int, *args: Any, **kwargs: Any) -> Any:
        if (topic, index) == ("t", 2):
            attempts.append(index)
            if len(attempts) < 3:
                raise StorageError("Too many open files")
        return make_leader(topic, index, *args, **kwargs)

    rm.make_leader = failing  # type: ignore[method-assign]
    builder.put(ci.partition_key("t", 2), _registration(TOPIC_ID, NODE, epoch=2), 31)
    asyncio.run(pub.publish(builder.build(31)))
    assert len(attempts) == 1 and not rm.get_partition("t", 2).is_leader  # type: ignore[union-attr]
    for revision, index in ((32, 0), (33, 1)):  # deltas that change other partitions only
        builder.put(ci.partition_key("t", index), _registration(TOPIC_ID, 3, epoch=2),
                    revision)
        asyncio.run(pub.publish(builder.build(revision)))
    hosted = rm.get_partition("t", 2)
    assert len(attempts) == 3 and hosted is not None and hosted.is_leader
    assert rm.get_partition("t", 0).leader_id == 3  # type: ignore[union-attr]


def test_an_image_not_built_from_the_one_applied_is_compared_in_full(tmp_path: Path) -> None:
    """Images skipped (a publish that raised, or several built in between): the next image's
    delta does not cover what changed before it, so every partition is compared."""
    pub, rm, builder, _ = delta_setup(tmp_path, {"t": 3})
    builder.put(ci.partition_key("t", 1), _registration(TOPIC_ID, NODE, epoch=2), 31)
    builder.build(31)  # never published
    builder.put(ci.partition_key("t", 2), _registration(TOPIC_ID, NODE, epoch=2), 32)
    asyncio.run(pub.publish(builder.build(32)))
    assert all(rm.get_partition("t", i).is_leader for i in (1, 2))  # type: ignore[union-attr]


def test_a_topic_deleted_in_a_delta_is_unhosted_and_its_offsets_forgotten(
        tmp_path: Path) -> None:
    pub, rm, builder, coordinator = delta_setup(tmp_path, {"t": 1, "u": 2})
    # CreatePartitions: u grows to 4 in two deltas (the count follows, from the deltas alone)
    u_id = builder.image.topics["u"].topic_id
    for revision, index in ((31, 2), (32, 3)):
        builder.put(ci.partition_key("u", index), _registration(u_id, 2), revision)
        asyncio.run(pub.publish(builder.build(revision)))
    assert rm.get_partition("u", 3) is not None
    builder.delete(ci.topic_key("u"))  # DeleteTopics: the topic key first
    asyncio.run(pub.publish(builder.build(33)))
    assert coordinator.deleted == [("u", i) for i in range(4)]
    assert all(rm.get_partition("u", i) is None for i in range(4))
    assert all(pub.log_manager.get_log("u", i) is None for i in range(4))
    assert rm.get_partition("t", 0) is not None


def hosted_state(pub: MetadataPublisher, fetchers: Fetchers) -> dict[str, Any]:
    rm = pub.replica_manager
    partitions = {(p.topic, p.partition): (
        p.topic_id, p.is_leader, p.leader_id, p.leader_epoch, p.replicas,
        sorted(p.isr) if p.is_leader else None, p.partition_epoch) for p in rm.partitions()}
    logs = sorted(pub.log_manager.all_logs())
    return {"partitions": partitions, "logs": logs, "failed": dict(pub._failed),
            "fetching": {tp: (e.node_id, e.port, epoch)
                         for tp, (e, epoch) in fetchers.fetching.items()},
            "deleted": cast(Coordinator, pub.group_coordinator).deleted}


def as_the_image_says(image: ClusterImage) -> dict[str, Any]:
    """What this broker hosts, leads and fetches by the image alone."""
    wanted = {tp: p for tp, p in image.partitions.items() if NODE in p.replicas}
    leads = {tp for tp, p in wanted.items() if p.leader == NODE and p.leader_broker_epoch == EPOCH}
    fetching = {tp: (p.leader, image.brokers[p.leader].port, p.leader_epoch)
                for tp, p in wanted.items() if p.leader not in (NODE, -1)}
    return {"hosted": set(wanted), "leads": leads, "fetching": fetching}


@pytest.mark.parametrize("seed", range(6))
def test_deltas_host_what_a_full_comparison_hosts(tmp_path: Path, seed: int) -> None:
    """The same random sequence of images — leaders moving (to this broker, to a previous
    incarnation of it, offline), replicas moving away and back, topics deleted and recreated,
    a broker restarting — applied from deltas and by full comparison: the same outcome."""
    rng = random.Random(seed)
    pubs = []
    for name in ("delta", "full"):
        pub, _, fetchers = publisher(tmp_path / name)
        pub.group_coordinator = cast(GroupCoordinator, Coordinator())
        pubs.append((pub, fetchers))
    builder = ImageBuilder()
    ids = {"t": TOPIC_ID, "u": uuid.UUID(int=0xA)}
    entries = {ci.broker_key(i): (BrokerRegistration(i, "127.0.0.1", 9090 + i).encode(),
                                  EPOCH if i == NODE else 9) for i in (1, 2, 3)}
    entries.update({ci.topic_key(t): (TopicRegistration(t, ids[t], 3).encode(), 10)
                    for t in ids})
    image = builder.load(entries, 10)
    revision = 10
    for _ in range(40):
        for _ in range(rng.randint(1, 3)):
            revision += 1
            roll = rng.random()
            topic = rng.choice(("t", "u"))
            if roll < 0.08:
                builder.delete(ci.topic_key(topic))
            elif roll < 0.16:
                ids[topic] = uuid.UUID(int=rng.randint(0xB, 0xFF))
                builder.put(ci.topic_key(topic), TopicRegistration(topic, ids[topic], 3).encode(),
                            revision)
            elif roll < 0.2:
                port = rng.choice((9092, 9192))  # restarted, maybe listening elsewhere
                builder.put(ci.broker_key(2), BrokerRegistration(2, "127.0.0.1", port).encode(),
                            revision)
            else:
                replicas = rng.choice(((1, 2, 3), (2, 3, 1), (2, 3)))
                leader = rng.choice((*replicas, -1))
                broker_epoch = rng.choice((EPOCH, EPOCH - 1)) if leader == NODE else 9
                epoch = revision  # grows with every change
                registration = PartitionRegistration(ids[topic], replicas, replicas[:2], leader,
                                                     epoch, broker_epoch, epoch)
                builder.put(ci.partition_key(topic, rng.randint(0, 2)), registration.encode(),
                            revision)
        was, image = image, builder.build(revision)
        assert image.delta_from == was.revision
        for pub, _ in pubs:
            shown = image if pub is pubs[0][0] else replace(image, changed_partitions=None)
            asyncio.run(pub.publish(shown))
        assert hosted_state(*pubs[0]) == hosted_state(*pubs[1])
        state = hosted_state(*pubs[0])
        assert as_the_image_says(image) == {
            "hosted": set(state["partitions"]), "fetching": state["fetching"],
            "leads": {tp for tp, p in state["partitions"].items() if p[1]}}
