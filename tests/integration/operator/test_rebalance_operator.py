"""Self-balancing against a real Strata cluster (SQLite metadata store), the operator as
deployed against kmock: pods ``events-<n>`` stand for node ``n`` of the real cluster.

Scale 3 -> 5 while a confluent-kafka producer writes with acks=all (idempotent): the operator
waits for the two new brokers to register, moves replicas in batches (AlterPartitionReassignments,
each batch waited for with ListPartitionReassignments), elects the preferred leaders, and ends
``Done`` with replicas and leaders within ±1 of even on the five brokers; every acknowledged
record is read back. Each batch is throttled (the moving replicas' throttled-replicas topic
configs and the brokers' throttled rates, in ``status.rebalance.throttle`` while it moves) and
no throttle is left once done. Then the annotation ``strata.dev/rebalance: "true"`` rebalances
a topic
created with every preferred leader on broker 0, and is removed once done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource

from strata.operator.kube import Kube

from ..cluster.cluster_processes import BackgroundProducer, ClusterProcesses, read_all
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator, wait_until
from .test_broker_operator import NS, ready_broker

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.timeout(300)]

PARTITIONS = 10
THROTTLE = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, cluster: ClusterProcesses,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": cluster.bootstrap,
                           "STRATA_OPERATOR_REBALANCE_BATCH_SIZE": "4",
                           "STRATA_OPERATOR_REBALANCE_THROTTLE": str(THROTTLE)}) as started:
        yield started


@pytest.fixture(scope="module")
def pods(kube: Kube, operator: OperatorProcess) -> StatefulSetController:
    return ready_broker(kube, operator, 60)


def rebalance_status(kube: Kube) -> dict[str, Any]:
    return dict(((kube.read("Broker", NS, "events") or {}).get("status") or {}).get(
        "rebalance") or {})


def counts(cluster: ClusterProcesses) -> tuple[Counter[int], Counter[int]]:
    """Replicas and leaders per broker over every topic, as Metadata reports them."""
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for topic in cluster.metadata().topics.values():
        for partition in topic.partitions.values():
            replicas.update(partition.replicas)
            leaders[partition.leader] += 1
    return replicas, leaders


def throttle_configs(cluster: ClusterProcesses) -> dict[str, str]:
    """Every replication throttle still set on a broker or on the topic ``balance``."""
    resources = [ConfigResource("broker", str(b)) for b in range(5)]
    resources.append(ConfigResource("topic", "balance"))
    left = {}
    for asked in resources:  # librdkafka: one broker resource per call
        (future,) = cluster.admin().describe_configs([asked]).values()
        for name, entry in future.result(timeout=30).items():
            if "replication.throttled" in name and entry.value not in (None, "", str(2**63 - 1)):
                left[f"{asked.name}/{name}"] = entry.value
    return left


def even(counter: Counter[int], brokers: range) -> bool:
    values = [counter.get(b, 0) for b in brokers]
    return max(values) - min(values) <= 1


def test_scale_up_rebalances_while_a_producer_writes(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    cluster.create_topic("balance", PARTITIONS, 3)
    with BackgroundProducer(cluster.bootstrap, "balance",
                            {"acks": "all", "enable.idempotence": True}) as producer:
        wait_until(lambda: producer.acked.count() > 200, 30, "records acknowledged")
        cluster.add_broker(3)
        cluster.add_broker(4)
        kube.patch("Broker", NS, "events", {"spec": {"replicas": 5}})

        throttles: list[dict[str, Any]] = []

        def done() -> bool:
            pods.sync()  # the StatefulSet controller creates events-3 and events-4
            status = rebalance_status(kube)
            if status.get("throttle"):
                throttles.append(status["throttle"])
            return status.get("state") == "Done"

        wait_until(done, 180, "the rebalance done", operator.log_tail)
        written = producer.acked.count()
        wait_until(lambda: producer.acked.count() > written + 100, 30,
                   "records acknowledged after the rebalance")
        acked = producer.stop()
    status = rebalance_status(kube)
    assert status["reason"] == "ScaleUp"
    assert throttles and all(t["rate"] == THROTTLE for t in throttles), throttles
    assert "throttle" not in status
    assert not throttle_configs(cluster), "throttles left after the rebalance"
    assert status["batchesDone"] >= 2, status  # 12 replica moves in batches of 4 partitions
    assert status["batchesDone"] == status["batchesTotal"]
    replicas, leaders = counts(cluster)
    assert even(replicas, range(5)), replicas
    assert min(replicas[b] for b in (3, 4)) >= 5, replicas
    wait_until(lambda: even(counts(cluster)[1], range(5)), 30,
               f"leaders within one of even ({leaders})", operator.log_tail)
    assert not acked.errors, acked.errors[:5]
    read = read_all(cluster.live_bootstrap(), "balance", PARTITIONS, acked.count())
    got = {(p, offset): value for p, records in read.items() for offset, value in records}
    missing = [key for key, value in acked.records.items() if got.get(key) != value]
    assert not missing, f"{len(missing)} acknowledged records not read back: {missing[:5]}"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in
                  kube.read("Broker", NS, "events")["status"]["conditions"]}
    assert conditions["Rebalancing"] == ("False", "RebalanceComplete")
    reasons = [e["reason"] for e in kube.list("Event", NS)]
    assert "RebalanceStarted" in reasons and "RebalanceComplete" in reasons


def test_the_annotation_fixes_a_skewed_leadership(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    # Every partition's preferred leader (and one replica) on broker 0.
    cluster.create_topic("skewed", assignment=[[0, 1], [0, 2], [0, 3], [0, 4], [0, 1]])
    kube.patch("Broker", NS, "events",
               {"metadata": {"annotations": {"strata.dev/rebalance": "true"}}})

    def fixed() -> bool:
        status = rebalance_status(kube)
        annotations = kube.read("Broker", NS, "events")["metadata"].get("annotations") or {}
        return (status.get("reason") == "Requested" and status.get("state") == "Done"
                and "strata.dev/rebalance" not in annotations)

    wait_until(fixed, 90, "the requested rebalance done", operator.log_tail)
    skewed = cluster.metadata().topics["skewed"].partitions.values()
    assert sorted(len(p.replicas) for p in skewed) == [2] * 5
    wait_until(lambda: even(counts(cluster)[1], range(5)), 30, "leaders within one of even",
               operator.log_tail)
