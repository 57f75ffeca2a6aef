"""The Broker reconcile pass (``broker.reconcile``, the function the kopf handlers call) against
the mock API server, with the Kafka side injected: while the cluster reports an under-replicated
partition no broker pod is deleted and Ready says which partitions it waits for; once every ISR
is full, exactly one pod — the highest outdated ordinal — is deleted per pass."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from strata.operator import broker
from strata.operator.kube import Kube
from strata.operator.rolling import ClusterHealth, TopicPartition
from strata.operator.topic_sync import ObservedTopic

from .kube_mock import StatefulSetController, running_kube_mock

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(60)]

NS = "gated"


class FakeCluster:
    """The ``kafka.Cluster`` protocol with a health answer the test sets."""

    def __init__(self) -> None:
        self.answer = ClusterHealth(reachable=True)
        self.asked = 0

    def health(self) -> ClusterHealth:
        self.asked += 1
        return self.answer

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {}

    def reassign(self, plan: Mapping[TopicPartition, tuple[int, ...]]) -> bool:
        return False

    def describe_topic(self, topic: str) -> ObservedTopic | None:
        raise AssertionError("not used by the Broker reconcile")

    def create_topic(self, topic: str, partitions: int, replicas: int | None,
                     config: Mapping[str, str]) -> None:
        raise AssertionError("not used by the Broker reconcile")

    def create_partitions(self, topic: str, total: int) -> None:
        raise AssertionError("not used by the Broker reconcile")

    def alter_config(self, topic: str, set_config: Mapping[str, str],
                     delete: tuple[str, ...]) -> None:
        raise AssertionError("not used by the Broker reconcile")

    def delete_topic(self, topic: str) -> None:
        raise AssertionError("not used by the Broker reconcile")


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    with running_kube_mock(tmp_path) as mock:
        yield mock.client()


def test_roll_waits_for_in_sync_replicas_then_goes_one_pod_at_a_time(kube: Kube) -> None:
    cluster = FakeCluster()
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "b", "namespace": NS},
                 "spec": {"replicas": 3, "metadata": {"managed": True},
                          "admin": {"enabled": False}}})

    def reconcile() -> dict[str, Any]:
        body = kube.read("Broker", NS, "b")
        assert body is not None
        return broker.reconcile(body, kube, lambda bootstrap, client_config: cluster)

    reconcile()
    controller = StatefulSetController(kube, NS)
    controller.sync()
    assert reconcile()["conditions"][0]["reason"] == "BrokersReady"
    assert cluster.asked == 0  # nothing to roll: the cluster is not asked

    kube.patch("Broker", NS, "b", {"spec": {"config": {"log.retention.ms": 1000}}})
    cluster.answer = ClusterHealth(reachable=True, under_replicated=(("orders", 2),))
    pods_before = {p["metadata"]["name"] for p in kube.list("Pod", NS)}
    for _ in range(3):
        condition = reconcile()["conditions"][0]
        assert condition["reason"] == "UnderReplicatedPartitions"
        assert "orders-2" in condition["message"]
    assert {p["metadata"]["name"] for p in kube.list("Pod", NS)} == pods_before
    assert cluster.asked == 3

    cluster.answer = ClusterHealth(reachable=True)
    deleted: list[str] = []
    for _ in range(10):
        before = {p["metadata"]["name"] for p in kube.list("Pod", NS)}
        reconcile()
        after = {p["metadata"]["name"] for p in kube.list("Pod", NS)}
        assert len(before - after) <= 1  # never more than one broker down
        deleted += sorted(before - after)
        controller.sync()  # the StatefulSet controller recreates it from the new template
        if len(deleted) == 3:
            break
    assert deleted == ["b-2", "b-1", "b-0"]
    assert reconcile()["conditions"][0]["reason"] == "BrokersReady"
