"""AlterReplicaLogDirs in a 3-broker cluster whose brokers have two ``log.dirs`` each: the
leader's and both followers' replicas of a partition move to their broker's other dir at
once, asked by kafka-python's admin client, while a producer keeps producing with acks=all
(followers keep fetching into the log being moved). Every move completes, the ISR stays
whole, and every acknowledged record is read back once, in order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError

from .cluster_processes import BackgroundProducer, ClusterProcesses, cluster_on, read_all

pytestmark = pytest.mark.integration

TOPIC = "moving"
PREFILL = 10_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with cluster_on("sqlite", tmp_path_factory.mktemp("log-dirs-cluster"),
                    overrides={"log.segment.bytes": "131072"},
                    log_dir_names=("a", "b")) as cluster:
        yield cluster


def replica_dirs(admin: KafkaAdminClient) -> dict[int, set[tuple[str, bool]]]:
    """broker -> {(log dir, is future)} of its replica of ``TOPIC``-0."""
    return {answer["broker"]: {(d["log_dir"], p["is_future_key"]) for d in answer["log_dirs"]
                               for t in d["topics"] for p in t["partitions"]}
            for answer in admin.describe_log_dirs(topic_partitions={TOPIC: [0]})}


def test_every_replica_moves_while_a_producer_keeps_producing(
        cluster: ClusterProcesses) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    with closing(KafkaAdminClient(bootstrap_servers=cluster.bootstrap,
                                  request_timeout_ms=10_000)) as admin, \
            BackgroundProducer(cluster.bootstrap, TOPIC,
                               {"acks": "all", "enable.idempotence": True}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= PREFILL, f"{PREFILL} acknowledged")
        targets: dict[int, str] = {}
        for node_id, places in replica_dirs(admin).items():
            ((source, _),) = places
            data_dir = cluster.broker(node_id).data_dir
            (targets[node_id],) = {str((data_dir / d).resolve()) for d in "ab"} - {source}
        answer = admin.alter_replica_log_dirs({
            TopicPartitionReplica(TOPIC, 0, node_id): target
            for node_id, target in targets.items()})
        assert set(answer.values()) == {NoError} and len(answer) == 3
        cluster.wait_for(lambda: replica_dirs(admin) == {
            node_id: {(target, False)} for node_id, target in targets.items()},
            "every replica in its new dir", timeout=90)
        moved_at = producer.acked.count()
        cluster.wait_for(lambda: producer.acked.count() > moved_at + 100, "appends after it")
        acked = producer.stop()
    assert not acked.errors, acked.errors[:5]
    for target in targets.values():  # the topic id file moved with the data
        assert (Path(target) / f"{TOPIC}-0" / "partition.metadata").is_file()
    cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None and len(p.isr) == 3,
                     "the full ISR")
    records = {offset: value for (_, offset), value in acked.records.items()}
    end = max(records) + 1
    assert sorted(records) == list(range(end)), "an acknowledged offset is missing"
    consumed = read_all(cluster.bootstrap, TOPIC, 1, end)[0]
    assert [offset for offset, _ in consumed] == list(range(end))
    assert dict(consumed) == records
