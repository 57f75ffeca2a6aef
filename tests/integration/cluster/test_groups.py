"""Consumer groups on a cluster: the coordinator is the leader of the group's
``__consumer_offsets`` partition; when its broker dies another replica takes over and rebuilds
the group's committed offsets from the replicated log."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from .cluster_processes import BackgroundProducer, ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GROUP = "billing"
TOPIC = "invoices"


def committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "log_level": 0})
    try:
        parts = consumer.committed([TopicPartition(TOPIC, p) for p in range(2)], timeout=10)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_group_survives_its_coordinators_death(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic(TOPIC, 2, 3)
    with BackgroundProducer(cluster.bootstrap, TOPIC, {"acks": "all"}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= 2000, "records to consume")
        producer.stop()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "log_level": 0})
    try:
        consumer.subscribe([TOPIC])
        read = 0
        deadline = time.monotonic() + 60
        while read < 1000:
            assert time.monotonic() < deadline, f"read only {read}"
            read += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
        consumer.commit(asynchronous=False)
        before = committed(cluster.bootstrap)
        assert sum(max(o, 0) for o in before.values()) == read
        # The coordinator: the leader of the group's __consumer_offsets partition.
        coordinator = cluster.admin().describe_consumer_groups([GROUP])[GROUP].result(
            timeout=10).coordinator.id
        cluster.broker(coordinator).kill()
        # Another broker coordinates now, with the same committed offsets ...
        cluster.wait_for(lambda: committed(cluster.live_bootstrap()) == before,
                         "the committed offsets served by the new coordinator")
        # ... and the member goes on consuming and committing through it.
        deadline = time.monotonic() + 60
        while read < 2000:  # exactly the rest: nothing read twice after the failover
            assert time.monotonic() < deadline, f"read only {read} after the failover"
            read += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    after = committed(cluster.live_bootstrap())
    assert sum(max(o, 0) for o in after.values()) == read == 2000
