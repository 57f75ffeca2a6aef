"""Day 2 of a Broker, the real operator loop against the mock API server and a real broker:
``storage.size`` raised -> every broker claim patched, ``StorageResizing`` until the claims'
capacity reaches it (the stand-in expansion controller is held, then let go), a decrease
refused with a Warning Event and the claims untouched; placement fields and the rack defaults
rendered into the StatefulSet; a Topic asking for more replicas than brokers is refused with a
condition, and an illegal Kafka topic name is ``InvalidSpec``, neither retried nor created."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from .kube_mock import StatefulSetController
from .operator_process import OperatorProcess, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "day2"


def broker_cr(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 2, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                     "admin": {"enabled": False}, **spec}}


def condition(kube: Kube, kind: str, name: str, of_type: str = "Ready"
              ) -> tuple[str | None, str | None]:
    status = (kube.read(kind, NS, name) or {}).get("status") or {}
    for item in status.get("conditions") or ():
        if item["type"] == of_type:
            return item["status"], item["reason"]
    return None, None


def claims(kube: Kube, prefix: str) -> dict[str, tuple[str, str]]:
    return {c["metadata"]["name"]: (c["spec"]["resources"]["requests"]["storage"],
                                    c["status"]["capacity"]["storage"])
            for c in kube.list("PersistentVolumeClaim", NS)
            if c["metadata"]["name"].startswith(f"data-{prefix}-")}


def event_reasons(kube: Kube, name: str) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in kube.list("Event", NS)
            if e["involvedObject"]["name"] == name]


def test_storage_increase_resizes_every_claim_and_a_decrease_is_refused(
        kube: Kube, operator: OperatorProcess) -> None:
    kube.create(broker_cr("vol", storage={"size": "1Gi"}))
    controller = StatefulSetController(kube, NS)

    def started() -> bool:
        controller.sync()
        return condition(kube, "Broker", "vol") == ("True", "BrokersReady")

    wait_until(started, 30, "Ready", operator.log_tail)
    assert claims(kube, "vol") == {"data-vol-0": ("1Gi", "1Gi"), "data-vol-1": ("1Gi", "1Gi")}
    assert condition(kube, "Broker", "vol", "StorageResizing") == ("False", "VolumesAtSize")

    controller.expand_volumes = False  # the volumes take their time
    kube.patch("Broker", NS, "vol", {"spec": {"storage": {"size": "2Gi"}}})
    wait_until(lambda: condition(kube, "Broker", "vol", "StorageResizing")
               == ("True", "VolumesResizing"), 30, "StorageResizing", operator.log_tail)
    assert claims(kube, "vol") == {"data-vol-0": ("2Gi", "1Gi"), "data-vol-1": ("2Gi", "1Gi")}
    assert condition(kube, "Broker", "vol", "Reconciling")[0] == "True"
    assert ("Normal", "VolumesResizing") in event_reasons(kube, "vol")

    controller.expand_volumes = True

    def expanded() -> bool:
        controller.sync()
        return condition(kube, "Broker", "vol", "StorageResizing") == ("False", "VolumesAtSize")

    wait_until(expanded, 30, "the resize to finish", operator.log_tail)
    assert claims(kube, "vol") == {"data-vol-0": ("2Gi", "2Gi"), "data-vol-1": ("2Gi", "2Gi")}
    assert condition(kube, "Broker", "vol", "Reconciling") == ("False", "Reconciled")
    broker = kube.read("Broker", NS, "vol")
    assert broker is not None
    assert all(c["observedGeneration"] == broker["metadata"]["generation"]
               for c in broker["status"]["conditions"])

    # kmock runs no CEL: the operator's own check refuses the decrease.
    kube.patch("Broker", NS, "vol", {"spec": {"storage": {"size": "1Gi"}}})
    wait_until(lambda: condition(kube, "Broker", "vol", "StorageResizing")
               == ("False", "StorageDecreaseNotPossible"), 30, "the decrease refused",
               operator.log_tail)
    assert ("Warning", "StorageDecreaseNotPossible") in event_reasons(kube, "vol")
    assert claims(kube, "vol") == {"data-vol-0": ("2Gi", "2Gi"), "data-vol-1": ("2Gi", "2Gi")}


def test_placement_and_rack_defaults_reach_the_pod_template(
        kube: Kube, operator: OperatorProcess) -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "kafka",
                  "effect": "NoSchedule"}
    kube.create(broker_cr("placed", tolerations=[toleration],
                          nodeSelector={"pool": "kafka"}, priorityClassName="high",
                          rack={"topologyKey": "topology.kubernetes.io/zone"}))

    def template() -> dict[str, Any] | None:
        sts = kube.read("StatefulSet", NS, "placed")
        return None if sts is None else sts["spec"]["template"]["spec"]

    pod = wait_until(template, 30, "the StatefulSet", operator.log_tail)
    assert pod["tolerations"] == [toleration]
    assert pod["nodeSelector"] == {"pool": "kafka"}
    assert pod["priorityClassName"] == "high"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def topic_cr(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Topic",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"broker": "vol", "partitions": 1, **spec}}


def test_topics_kafka_would_refuse_are_conditions_not_retries(
        kube: Kube, operator: OperatorProcess, broker: BrokerProcess) -> None:
    kube.create(topic_cr("too-many", replicas=2))  # one real broker
    kube.create(topic_cr("dots", topicName=".."))  # kmock runs no CEL
    wait_until(lambda: condition(kube, "Topic", "too-many")
               == ("False", "InvalidReplicationFactor"), 30, "InvalidReplicationFactor",
               operator.log_tail)
    wait_until(lambda: condition(kube, "Topic", "dots") == ("False", "InvalidSpec"), 30,
               "InvalidSpec", operator.log_tail)
    assert ("Warning", "InvalidReplicationFactor") in event_reasons(kube, "too-many")
    assert ("Warning", "InvalidSpec") in event_reasons(kube, "dots")
    topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5).topics
    assert "too-many" not in topics and ".." not in topics
    # A topic at the broker's size is Ready, and its status says what Kafka has.
    kube.create(topic_cr("fits", replicas=1, partitions=2))
    wait_until(lambda: condition(kube, "Topic", "fits") == ("True", "TopicReady"), 30,
               "TopicReady", operator.log_tail)
    status = (kube.read("Topic", NS, "fits") or {})["status"]
    assert (status["partitions"], status["replicas"]) == (2, 1)
