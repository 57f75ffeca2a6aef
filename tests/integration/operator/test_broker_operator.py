"""The real operator loop (``kopf run -A --standalone -m strata.operator.main``) against the mock
API server, for ``Broker``: owned objects, drift repair, and a rolling restart that goes one pod
at a time and waits while the real broker cannot answer the under-replicated check (SIGSTOP)."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strata.operator.builders import CONFIG_HASH_ANNOTATION
from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from .kube_mock import StatefulSetController
from .operator_process import OperatorProcess, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "kafka"
OWNED = [("ConfigMap", "events-config"), ("Service", "events-brokers"),
         ("Service", "events-bootstrap"), ("StatefulSet", "events"),
         ("PodDisruptionBudget", "events"), ("Deployment", "events-admin"),
         ("Service", "events-admin")]


def broker_cr(replicas: int = 3, config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
            "metadata": {"name": "events", "namespace": NS},
            "spec": {"replicas": replicas, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                     "config": config or {"num.partitions": 3}}}


def ready_reason(kube: Kube) -> tuple[str | None, str | None]:
    status = (kube.read("Broker", NS, "events") or {}).get("status") or {}
    for condition in status.get("conditions") or ():
        if condition["type"] == "Ready":
            return condition["status"], condition["reason"]
    return None, None


def pod_hashes(kube: Kube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["annotations"].get(CONFIG_HASH_ANNOTATION, "")
            for p in kube.list("Pod", NS)}


def ready_broker(kube: Kube, operator: OperatorProcess, ready_within_s: float
                 ) -> StatefulSetController:
    """Create the Broker, wait for its owned objects, start its pods (the returned controller)
    and wait until the Broker is Ready."""
    kube.create(broker_cr())
    wait_until(lambda: all(kube.read(k, NS, n) for k, n in OWNED), 30, "owned objects",
               operator.log_tail)
    controller = StatefulSetController(kube, NS)
    controller.sync()
    wait_until(lambda: ready_reason(kube) == ("True", "BrokersReady"), ready_within_s, "Ready",
               operator.log_tail)
    return controller


@pytest.fixture(scope="module")
def created(kube: Kube, operator: OperatorProcess) -> StatefulSetController:
    return ready_broker(kube, operator, 30)


def test_broker_creates_owned_objects_and_status(
        kube: Kube, created: StatefulSetController) -> None:
    owner = kube.read("Broker", NS, "events")
    assert owner is not None
    # No finalizer: deleting a Broker never waits for the operator (nor hangs a namespace).
    assert not owner["metadata"].get("finalizers")
    for kind, name in OWNED:
        obj = kube.read(kind, NS, name)
        assert obj is not None, (kind, name)
        references = obj["metadata"]["ownerReferences"]
        assert references == [{"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                               "name": "events", "uid": owner["metadata"]["uid"],
                               "controller": True, "blockOwnerDeletion": True}]
    sts = kube.read("StatefulSet", NS, "events")
    assert sts is not None
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["spec"]["replicas"] == 3
    status = owner["status"]
    assert status["bootstrapServers"] == "events-bootstrap.kafka.svc:9092"
    assert status["adminUrl"] == "http://events-admin.kafka.svc:8080"
    assert status["readyReplicas"] == 3
    assert status["observedGeneration"] == owner["metadata"]["generation"]
    properties = kube.read("ConfigMap", NS, "events-config")["data"]["server.properties"]
    assert "num.partitions=3\n" in properties
    assert "metadata.store=etcd://etcd:2379\n" in properties


def test_drift_in_owned_objects_is_repaired(
        kube: Kube, created: StatefulSetController, operator: OperatorProcess) -> None:
    kube.delete("ConfigMap", NS, "events-config")
    kube.patch("Service", NS, "events-bootstrap", {"spec": {"ports": [
        {"name": "kafka", "port": 1234, "targetPort": "kafka", "protocol": "TCP"}]}})
    kube.patch("StatefulSet", NS, "events", {"spec": {"replicas": 7}})
    wait_until(lambda: kube.read("ConfigMap", NS, "events-config"), 20,
               "the ConfigMap to be recreated", operator.log_tail)
    wait_until(lambda: kube.read("Service", NS, "events-bootstrap")["spec"]["ports"][0]["port"]
               == 9092, 20, "the Service port to be restored", operator.log_tail)
    wait_until(lambda: kube.read("StatefulSet", NS, "events")["spec"]["replicas"] == 3, 20,
               "the StatefulSet replicas to be restored", operator.log_tail)


def test_rolling_restart_one_pod_at_a_time_only_when_cluster_answers(
        kube: Kube, created: StatefulSetController, operator: OperatorProcess,
        broker: BrokerProcess) -> None:
    controller = created
    wait_until(lambda: ready_reason(kube) == ("True", "BrokersReady"), 30, "Ready",
               operator.log_tail)
    old = pod_hashes(kube)
    assert len(set(old.values())) == 1
    assert broker.pid is not None
    os.kill(broker.pid, signal.SIGSTOP)  # the cluster cannot answer "any under-replicated?"
    try:
        kube.patch("Broker", NS, "events", {"spec": {"config": {"num.partitions": 6}}})
        wait_until(lambda: ready_reason(kube) == ("False", "ClusterUnreachable"), 30,
                   "the roll to wait for the cluster", operator.log_tail)
        assert pod_hashes(kube) == old, "a pod was restarted while the cluster was silent"
        new_hash = kube.read("StatefulSet", NS, "events")["spec"]["template"]["metadata"][
            "annotations"][CONFIG_HASH_ANNOTATION]
        assert new_hash not in old.values()
    finally:
        os.kill(broker.pid, signal.SIGCONT)

    order: list[str] = []
    most_missing = 0

    def rolled() -> bool:
        nonlocal most_missing
        hashes = pod_hashes(kube)
        most_missing = max(most_missing, 3 - len(hashes))
        controller.sync()  # the StatefulSet controller recreates a deleted pod
        for name, value in pod_hashes(kube).items():
            if value == new_hash and name not in order:
                order.append(name)
        return len(order) == 3

    wait_until(rolled, 60, "every pod restarted with the new config", operator.log_tail)
    assert order == ["events-2", "events-1", "events-0"]
    assert most_missing <= 1
    wait_until(lambda: ready_reason(kube) == ("True", "BrokersReady"), 30, "Ready again",
               operator.log_tail)


def test_rack_awareness_annotates_pods_with_their_nodes_zone(
        kube: Kube, operator: OperatorProcess) -> None:
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-a"}}})
    zoned = broker_cr(replicas=2)
    zoned["metadata"] = {"name": "zoned", "namespace": "zones"}
    zoned["spec"]["rack"] = {"topologyKey": "topology.kubernetes.io/zone"}
    kube.create(zoned)
    controller = StatefulSetController(kube, "zones", node_name="node-a")

    def racks() -> dict[str, str] | None:
        controller.sync()
        found = {p["metadata"]["name"]: p["metadata"]["annotations"].get("strata.dev/rack", "")
                 for p in kube.list("Pod", "zones")}
        return found if len(found) == 2 and all(found.values()) else None

    assert wait_until(racks, 30, "rack annotations", operator.log_tail) == {
        "zoned-0": "zone-a", "zoned-1": "zone-a"}
    container = kube.read("StatefulSet", "zones", "zoned")["spec"]["template"]["spec"][
        "containers"][0]
    assert {"name": "STRATA_RACK_ENABLED", "value": "1"} in container["env"]
    kube.delete("Broker", "zones", "zoned")  # no finalizer: gone at once
    assert kube.read("Broker", "zones", "zoned") is None


def test_scale_down_waits_until_no_partition_lives_on_leaving_brokers(
        kube: Kube, created: StatefulSetController, operator: OperatorProcess,
        broker: BrokerProcess) -> None:
    # The real broker is node.id 1: a partition of this topic lives on a broker that goes
    # when "events" shrinks from 3 brokers (0, 1, 2) to 1 (0).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("pinned", num_partitions=1,
                                  replication_factor=1)])["pinned"].result(timeout=10)
    try:
        kube.patch("Broker", NS, "events", {"spec": {"replicas": 1}})
        wait_until(lambda: ready_reason(kube) == ("False", "ScaleDownBlocked"), 30,
                   "ScaleDownBlocked", operator.log_tail)
        assert kube.read("StatefulSet", NS, "events")["spec"]["replicas"] == 3
    finally:
        admin.delete_topics(["pinned"])["pinned"].result(timeout=10)
    wait_until(lambda: kube.read("StatefulSet", NS, "events")["spec"]["replicas"] == 1, 30,
               "the StatefulSet to shrink once no replica is on brokers 1 and 2",
               operator.log_tail)
