"""Replication throttles (KIP-73) on three real brokers: a reassignment's new replica catches up
at the throttled rate (within 20%, issue 21's criterion) while an unthrottled partition moves at
full speed and acks=all writes keep being acknowledged; removing the throttle lets the move
finish; every acknowledged record is read back from the new replica's broker."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from .cluster_processes import BackgroundProducer, ClusterProcesses, cluster_on, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 1024 * 1024  # bytes/s
VALUE = b"x" * 1000
THROTTLED_RECORDS = 7_000  # ~7 MB to catch up at 1 MB/s
FREE_RECORDS = 4_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    # Fetches of at most 256 KiB a partition: the rate is measured in steps of that size.
    with cluster_on("sqlite", tmp_path_factory.mktemp("throttle"), 3,
                    {"replica.fetch.max.bytes": "262144"}) as started:
        yield started


def fill(cluster: ClusterProcesses, topic: str, count: int) -> dict[int, bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, "batch.size": 65536,
                         "log_level": 0})
    acked: dict[int, bytes] = {}

    def delivered(error: object, message: Any) -> None:
        assert error is None, error
        acked[message.offset()] = message.value()

    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=VALUE + b"%08d" % i, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(acked) == count
    return acked


def log_bytes(cluster: ClusterProcesses, node: int, topic: str) -> int:
    directory = cluster.broker(node).data_dir / f"{topic}-0"
    return sum(p.stat().st_size for p in Path(directory).glob("*.log")) if directory.exists() \
        else 0


def throttle_gauge(cluster: ClusterProcesses, node: int, side: str) -> float | None:
    """``strata_replication_throttled_topics`` of one side of broker ``node``."""
    url = f"http://127.0.0.1:{cluster.broker(node).http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    prefix = f'strata_replication_throttled_topics{{replication_type="{side}"}} '
    return next((float(line[len(prefix):]) for line in text.splitlines()
                 if line.startswith(prefix)), None)


def alter(cluster: ClusterProcesses, kind: ResourceType, name: str,
          configs: dict[str, str | None]) -> None:
    entries = [ConfigEntry(k, v or "", incremental_operation=(
        AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE))
        for k, v in configs.items()]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    for future in cluster.admin().incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_a_throttled_move_catches_up_at_the_throttled_rate(cluster: ClusterProcesses) -> None:
    cluster.create_topic("throttled", assignment=[[0, 1]])
    cluster.create_topic("free", assignment=[[0, 1]])
    throttled = fill(cluster, "throttled", THROTTLED_RECORDS)
    fill(cluster, "free", FREE_RECORDS)
    total = log_bytes(cluster, 0, "throttled")
    # As kafka-reassign-partitions --throttle: the existing replicas on the leader side, the
    # new one on the follower side, and the rate on every broker involved.
    alter(cluster, ResourceType.TOPIC, "throttled", {
        "leader.replication.throttled.replicas": "0:0,0:1",
        "follower.replication.throttled.replicas": "0:2"})
    for node in range(3):
        alter(cluster, ResourceType.BROKER, str(node), {
            "leader.replication.throttled.rate": str(RATE),
            "follower.replication.throttled.rate": str(RATE)})
    # Each broker applies configs as its metadata image gets them (asynchronously, as in
    # Kafka): wait until the leader and the new replica's broker throttle the topic.
    cluster.wait_for(lambda: throttle_gauge(cluster, 0, "LeaderReplication") == 1.0
                     and throttle_gauge(cluster, 2, "FollowerReplication") == 1.0,
                     "the throttles in force on brokers 0 and 2")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    with BackgroundProducer(cluster.bootstrap, "free", {"acks": "all",
                                                        "enable.idempotence": True}) as prod:
        try:
            admin.alter_partition_reassignments({TopicPartition("throttled", 0): [0, 1, 2],
                                                 TopicPartition("free", 0): [0, 1, 2]})
            # The unthrottled partition moves at full speed: done before the throttled one
            # could have taken a quarter of its bytes.
            started = time.monotonic()
            cluster.wait_for(lambda: (p := cluster.partition("free")) is not None
                             and set(p.isr) == {0, 1, 2}, "free-0 moved", timeout=20)
            assert log_bytes(cluster, 2, "throttled") < total / 4
            free_moved_s = time.monotonic() - started
            # The throttled replica's catch-up rate, between 1.5 MB and 5.5 MB (after the first
            # fetches, which the rate allows before it has a measurement).
            low, high = 1_500_000, 5_500_000
            t_low = cluster.wait_for(lambda: log_bytes(cluster, 2, "throttled") >= low
                                     and time.monotonic(), "1.5 MB on broker 2", timeout=20)
            at_low = log_bytes(cluster, 2, "throttled")
            t_high = cluster.wait_for(lambda: log_bytes(cluster, 2, "throttled") >= high
                                      and time.monotonic(), "5.5 MB on broker 2", timeout=20)
            rate = (log_bytes(cluster, 2, "throttled") - at_low) / (t_high - t_low)
            print(f"free-0 moved in {free_moved_s:.1f} s; throttled catch-up {rate / 1e6:.2f} "
                  f"MB/s against a throttle of {RATE / 1e6:.2f} MB/s")
            assert 0.8 * RATE <= rate <= 1.2 * RATE
            assert (p := cluster.partition("throttled")) is not None and 2 not in p.isr
            # Removing the throttle lets the move finish.
            for node in range(3):
                alter(cluster, ResourceType.BROKER, str(node), {
                    "leader.replication.throttled.rate": None,
                    "follower.replication.throttled.rate": None})
            cluster.wait_for(lambda: (p := cluster.partition("throttled")) is not None
                             and set(p.isr) == {0, 1, 2}, "throttled-0 moved", timeout=20)
            cluster.wait_for(lambda: admin.list_partition_reassignments() == {},
                             "no reassignment in progress")
        finally:
            admin.close()
        acked = prod.stop()
    assert not acked.errors, acked.errors[:3]
    assert acked.count() > 0
    # Every acknowledged record, read back from the new replica alone.
    for node in (0, 1):
        cluster.broker(node).kill()
    cluster.wait_for(lambda: (p := cluster.partition("throttled", via=2)) is not None
                     and p.leader == 2 and (f := cluster.partition("free", via=2)) is not None
                     and f.leader == 2, "broker 2 leads both")
    log = dict(read_all(cluster.live_bootstrap(), "throttled", 1, len(throttled))[0])
    assert all(log.get(o) == v for o, v in throttled.items())
    free_log = dict(read_all(cluster.live_bootstrap(), "free", 1, acked.count())[0])
    assert all(free_log.get(o) == v for (_, o), v in acked.records.items())
