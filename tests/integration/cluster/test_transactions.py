"""Transactions on a 3-broker cluster: the coordinator's markers reach leaders on the other
brokers (WriteTxnMarkers over the inter-broker listener) and the transaction completes.

The wire client speaks to the coordinator FindCoordinator names; the topic has 6 partitions of
RF 3 spread over the 3 brokers, so the coordinator writes most markers remotely. The
transaction reaches CompleteCommit / CompleteAbort only when every leader acknowledged its
markers. confluent-kafka's transactional producer interleaves commits and aborts over those 6
partitions: read_committed consumers see exactly the committed records in order,
read_uncommitted ones every data record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from strata.protocol import ApiKey, ErrorCode

from ..clients.wire import KafkaWire
from .cluster_processes import ClusterProcesses, cluster_on

pytestmark = pytest.mark.integration

TID: Final = "cluster-tx"
PARTITIONS: Final = 6
DEADLINE_S: Final = 20.0


def coordinator_of(cluster: ClusterProcesses, transactional_id: str) -> str:
    with KafkaWire.to(cluster.brokers[0].bootstrap) as wire:
        found = cluster.wait_for(lambda: (f := wire.request(
            ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        ).error_code == ErrorCode.none and f, "a transaction coordinator")
    return f"{found.host}:{found.port}"


def listed_state(wire: KafkaWire) -> str | None:
    listed = wire.request(ApiKey.LIST_TRANSACTIONS, 0,
                          {"state_filters": [], "producer_id_filters": []})
    return next((t.transaction_state for t in listed.transaction_states
                 if t.transactional_id == TID), None)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    """One backend is enough: the metadata store plays no part here."""
    with cluster_on("sqlite", tmp_path, 3, {"transaction.state.log.num.partitions": "3"}) as c:
        yield c


def test_markers_reach_leaders_on_other_brokers(cluster: ClusterProcesses) -> None:
    cluster.create_topic("txn-spread", PARTITIONS, 3)
    leaders = {cluster.partition("txn-spread", i).leader for i in range(PARTITIONS)}
    assert len(leaders) > 1  # some markers must go to another broker
    with KafkaWire.to(coordinator_of(cluster, TID)) as wire:
        init: Any = cluster.wait_for(lambda: (r := wire.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": TID, "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1})).error_code == ErrorCode.none and r, "InitProducerId")
        for commit, wanted in ((True, "CompleteCommit"), (False, "CompleteAbort")):
            added = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": TID,
                "v3_and_below_producer_id": init.producer_id,
                "v3_and_below_producer_epoch": init.producer_epoch,
                "v3_and_below_topics": [{"name": "txn-spread",
                                         "partitions": list(range(PARTITIONS))}]})
            assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
                    for p in t.results_by_partition} == {ErrorCode.none}
            started = time.monotonic()
            ended = wire.request(ApiKey.END_TXN, 3, {
                "transactional_id": TID, "producer_id": init.producer_id,
                "producer_epoch": init.producer_epoch, "committed": commit})
            assert ended.error_code == ErrorCode.none
            cluster.wait_for(lambda w=wanted: listed_state(wire) == w, wanted, DEADLINE_S)
            assert time.monotonic() - started < DEADLINE_S


def read_partitions(bootstrap: str, topic: str, isolation: str,
                    expected: int) -> dict[int, list[bytes]]:
    """Every data record value by partition, in offset order, under ``isolation``, once
    ``expected`` arrived and every partition reported its end (or the deadline)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"iso-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline and not (
                sum(map(len, out.values())) >= expected and len(at_end) == PARTITIONS):
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    at_end.discard(message.partition())
                    out[message.partition()].append(message.value())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
    finally:
        consumer.close()
    return out


def test_confluent_kafka_interleaved_commits_and_aborts_over_six_partitions(
        cluster: ClusterProcesses) -> None:
    topic = "txn-interleaved"
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "ck-mix",
                         "message.timeout.ms": 20_000})
    producer.init_transactions(DEADLINE_S)
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    everything: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for txn in range(10):
        commit = txn % 2 == 0
        producer.begin_transaction()
        for i in range(60):
            partition, value = i % PARTITIONS, f"t{txn}-r{i}".encode()
            producer.produce(topic, value, partition=partition)
            everything[partition].append(value)
            if commit:
                committed[partition].append(value)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            assert producer.flush(DEADLINE_S) == 0  # the aborted records reach the logs
            producer.abort_transaction(DEADLINE_S)
    # read_committed: exactly the committed records, in order, per partition.
    assert read_partitions(cluster.bootstrap, topic, "read_committed", 300) == committed
    # read_uncommitted: every data record (aborted ones too, control records never).
    assert read_partitions(cluster.bootstrap, topic, "read_uncommitted", 600) == everything
