"""The ``Rebalance`` resource against a real 3-broker Strata cluster (SQLite metadata store),
the operator as deployed against kmock (pods ``events-<n>`` stand for node ``n``).

A ``remove-brokers`` Rebalance of broker 2 on RF 2 topics, while a confluent-kafka producer
writes with acks=all (idempotent): the proposal appears in the status and nothing moves during
several operator passes until the approve annotation; then every replica leaves broker 2 in
throttled batches, the run ends ``Ready`` with every batch done and no throttle left, and every
acknowledged record is read back. Removing two of the three brokers is refused (RF 2 cannot be
held) and moves nothing.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource

from strata.operator.kube import Kube

from ..cluster.cluster_processes import BackgroundProducer, ClusterProcesses, read_all
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator, wait_until
from .test_broker_operator import NS, ready_broker

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 6
THROTTLE = 10 * 1024 * 1024
APPROVE = "strata.dev/rebalance-approve"


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, cluster: ClusterProcesses,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": cluster.bootstrap,
                           "STRATA_OPERATOR_REBALANCE_BATCH_SIZE": "2"}) as started:
        yield started


@pytest.fixture(scope="module")
def pods(kube: Kube, operator: OperatorProcess) -> StatefulSetController:
    return ready_broker(kube, operator, 60)


def rebalance(name: str, brokers: list[int], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Rebalance",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"brokerRef": "events", "mode": "remove-brokers", "brokers": brokers,
                     **spec}}


def status_of(kube: Kube, name: str) -> dict[str, Any]:
    return dict((kube.read("Rebalance", NS, name) or {}).get("status") or {})


def condition_map(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}


def assignment(cluster: ClusterProcesses) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(str(t.topic), int(p.id)): tuple(p.replicas)
            for t in cluster.metadata().topics.values() for p in t.partitions.values()}


def reconciles(operator: OperatorProcess) -> float:
    """Rebalance passes the operator has run (its /metrics)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics",
                                    timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0
    match = re.search(r'^strata_operator_reconciles_total\{kind="Rebalance"\} (\S+)$', text,
                      re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def throttles_left(cluster: ClusterProcesses, topic: str) -> dict[str, str]:
    left = {}
    for asked in [*(ConfigResource("broker", str(b)) for b in range(3)),
                  ConfigResource("topic", topic)]:
        (future,) = cluster.admin().describe_configs([asked]).values()
        for name, entry in future.result(timeout=30).items():
            if "replication.throttled" in name and entry.value not in (None, "", str(2**63 - 1)):
                left[f"{asked.name}/{name}"] = entry.value
    return left


def test_two_of_three_brokers_cannot_be_removed_with_rf_2(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    cluster.create_topic("drain", PARTITIONS, 2)
    before = assignment(cluster)
    kube.create(rebalance("drain-two", [1, 2]))

    def refused() -> dict[str, Any] | None:
        status = status_of(kube, "drain-two")
        return status if status.get("state") == "NotReady" else None

    status = wait_until(refused, 30, "the proposal refused", operator.log_tail)
    found = condition_map(status)
    assert found["ProposalReady"] == ("False", "ProposalRefused"), found
    assert found["Ready"] == ("False", "ProposalRefused")
    assert "only 1 brokers would remain" in status["conditions"][0]["message"] or \
        "cannot remove brokers [1, 2]" in status["conditions"][0]["message"], status
    assert "proposal" not in status and "inFlight" not in status
    assert assignment(cluster) == before
    reasons = [e["reason"] for e in kube.list("Event", NS)
               if e["involvedObject"]["name"] == "drain-two"]
    assert reasons == ["ProposalRefused"], reasons


def test_remove_broker_after_approval_while_a_producer_writes(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    before = assignment(cluster)
    on_two = [tp for tp, replicas in before.items() if 2 in replicas]
    assert on_two, before
    with BackgroundProducer(cluster.bootstrap, "drain",
                            {"acks": "all", "enable.idempotence": True}) as producer:
        wait_until(lambda: producer.acked.count() > 200, 30, "records acknowledged")
        kube.create(rebalance("drain-2", [2], throttle=THROTTLE))

        def proposed() -> dict[str, Any] | None:
            status = status_of(kube, "drain-2")
            return status if status.get("state") == "ProposalReady" else None

        status = wait_until(proposed, 30, "the proposal", operator.log_tail)
        assert condition_map(status)["ProposalReady"] == ("True", "ProposalReady")
        assert condition_map(status)["Ready"] == ("False", "WaitingForApproval")
        assert status["proposal"]["moves"] == len(on_two), status["proposal"]
        assert status["progress"]["batchesTotal"] == status["proposal"]["batches"] >= 2
        planned = {(e["topic"], e["partition"]) for e in status["plan"]}
        assert set(on_two) <= planned
        # Several passes of the operator later, nothing has moved.
        passes = reconciles(operator)
        wait_until(lambda: reconciles(operator) >= passes + 3, 30, "three more passes",
                   operator.log_tail)
        assert assignment(cluster) == before
        assert status_of(kube, "drain-2")["state"] == "ProposalReady"

        kube.patch("Rebalance", NS, "drain-2", {"metadata": {"annotations": {APPROVE: "true"}}})
        throttles: list[dict[str, Any]] = []

        def finished() -> dict[str, Any] | None:
            current = status_of(kube, "drain-2")
            if current.get("throttle"):
                throttles.append(current["throttle"])
            return current if current.get("state") == "Ready" else None

        status = wait_until(finished, 90, "the rebalance Ready", operator.log_tail)
        written = producer.acked.count()
        wait_until(lambda: producer.acked.count() > written + 100, 30,
                   "records acknowledged after the rebalance")
        acked = producer.stop()
    after = assignment(cluster)
    assert not [tp for tp, replicas in after.items() if 2 in replicas], after
    assert all(len(set(after[tp])) == 2 for tp in before if tp[0] == "drain"), after
    progress = status["progress"]
    assert progress["batchesDone"] == progress["batchesTotal"] == status["proposal"]["batches"]
    assert progress["summary"] == f"{progress['batchesDone']}/{progress['batchesTotal']}"
    assert condition_map(status) == {"ProposalReady": ("True", "ProposalReady"),
                                     "Rebalancing": ("False", "RebalanceComplete"),
                                     "Ready": ("True", "RebalanceComplete")}
    assert throttles and all(t["rate"] == THROTTLE for t in throttles), throttles
    assert "throttle" not in status and "inFlight" not in status
    assert not throttles_left(cluster, "drain"), "throttles left after the rebalance"
    leaders = {int(p.leader) for p in cluster.metadata().topics["drain"].partitions.values()}
    assert 2 not in leaders, leaders
    reasons = [e["reason"] for e in kube.list("Event", NS)
               if e["involvedObject"]["name"] == "drain-2"]
    for reason in ("ProposalReady", "RebalanceApproved", "Rebalancing", "RebalanceComplete"):
        assert reason in reasons, reasons
    assert not acked.errors, acked.errors[:5]
    read = read_all(cluster.live_bootstrap(), "drain", PARTITIONS, acked.count())
    got = {(p, offset): value for p, records in read.items() for offset, value in records}
    missing = [key for key, value in acked.records.items() if got.get(key) != value]
    assert not missing, f"{len(missing)} acknowledged records not read back: {missing[:5]}"
