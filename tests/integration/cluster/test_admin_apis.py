"""Admin APIs against a 3-broker cluster whose brokers have two ``log.dirs`` each:
DescribeLogDirs and DescribeProducers asked by kafka-python's admin client
(``describe_log_dirs``, ``describe_producers``) as tools such as ``kafka-log-dirs.sh`` ask
them, and client quotas altered through one broker and described by every broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NotLeaderForPartitionError

from strata.client.broker_client import BrokerClient
from strata.protocol.api_keys import ApiKey

from .cluster_processes import ClusterProcesses

TOPIC = "dirs"
PARTITIONS = 4
RECORDS_PER_PARTITION = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    workdir = tmp_path_factory.mktemp("log-dirs")
    cluster = ClusterProcesses(workdir, f"sqlite:///{workdir / 'meta.db'}", 3)
    for broker in cluster.brokers:
        broker.config["log.dirs"] = f"{broker.data_dir}/a,{broker.data_dir}/b"
    try:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                             "acks": "all", "log_level": 0})
        for i in range(PARTITIONS * RECORDS_PER_PARTITION):
            producer.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        yield cluster
    finally:
        for broker in cluster.brokers:
            broker.kill()


@pytest.fixture
def admin(cluster: ClusterProcesses) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def test_every_broker_lists_both_log_dirs_and_each_replica_once(
        cluster: ClusterProcesses, admin: KafkaAdminClient) -> None:
    answers = {answer["broker"]: answer["log_dirs"] for answer in admin.describe_log_dirs()}
    assert sorted(answers) == [0, 1, 2]
    for node_id, log_dirs in answers.items():
        data_dir = cluster.broker(node_id).data_dir
        assert sorted(d["log_dir"] for d in log_dirs) == [
            str((data_dir / "a").resolve()), str((data_dir / "b").resolve())]
        hosted = [(t["name"], p["partition_index"], p["partition_size"], p["offset_lag"])
                  for d in log_dirs for t in d["topics"] for p in t["partitions"]]
        assert sorted((name, index) for name, index, _, _ in hosted) == [
            (TOPIC, index) for index in range(PARTITIONS)]
        assert all(size > RECORDS_PER_PARTITION * 100 and lag == 0
                   for _, _, size, lag in hosted)
        assert all(d["error_code"] == 0 and d["total_bytes"] >= d["usable_bytes"] > 0
                   for d in log_dirs)


def test_a_partition_filter_lists_only_that_partition(admin: KafkaAdminClient) -> None:
    answers = admin.describe_log_dirs(topic_partitions={TOPIC: [1]})
    for answer in answers:
        listed = [(t["name"], p["partition_index"])
                  for d in answer["log_dirs"] for t in d["topics"] for p in t["partitions"]]
        assert listed == [(TOPIC, 1)]


def test_the_leader_describes_its_idempotent_producer(admin: KafkaAdminClient) -> None:
    states = admin.describe_producers([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    producer_ids = set()
    for state in states.values():
        (producer,) = state.active_producers
        producer_ids.add(producer.producer_id)
        assert producer.producer_epoch == 0
        assert producer.last_sequence == RECORDS_PER_PARTITION - 1
        assert producer.last_timestamp > 0
        assert producer.coordinator_epoch == -1
    assert len(producer_ids) == 1  # one producer wrote every partition


def test_a_follower_refuses_describe_producers(cluster: ClusterProcesses,
                                               admin: KafkaAdminClient) -> None:
    view = cluster.partition(TOPIC, 0)
    follower = next(r for r in view.replicas if r != view.leader)
    with pytest.raises(NotLeaderForPartitionError):
        admin.describe_producers([TopicPartition(TOPIC, 0)], broker_id=follower)


async def _ask(port: int, api_key: ApiKey, **fields: Any) -> Any:
    client = BrokerClient("127.0.0.1", port, client_id="quota-test", request_timeout_s=10)
    try:
        return await client.request(api_key, 1, fields)
    finally:
        await client.close()


def test_quotas_altered_through_one_broker_are_described_by_every_broker(
        cluster: ClusterProcesses) -> None:
    altered = asyncio.run(_ask(cluster.brokers[0].port, ApiKey.ALTER_CLIENT_QUOTAS,
                               validate_only=False, entries=[{
                                   "entity": [{"entity_type": "user", "entity_name": None}],
                                   "ops": [{"key": "consumer_byte_rate", "value": 65536.0,
                                            "remove": False}]}]))
    assert [e.error_code for e in altered.entries] == [0]
    # the broker that wrote it answers at once (read-your-writes); the others follow the image
    deadline = time.monotonic() + 15
    for broker in cluster.brokers:
        while True:
            described = asyncio.run(_ask(broker.port, ApiKey.DESCRIBE_CLIENT_QUOTAS,
                                         components=[], strict=False))
            found = [(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                      [(v.key, v.value) for v in entry.values]) for entry in described.entries]
            if found or broker is cluster.brokers[0] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found == [((("user", None),), [("consumer_byte_rate", 65536.0)])], broker.port
