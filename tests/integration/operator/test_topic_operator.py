"""The real operator loop against the mock API server and a real Strata broker, for ``Topic``:
create, grow, reconfigure and delete a topic over the Kafka admin API; changes made directly in
the cluster reverted; two Topics naming one topic -> ``ResourceConflict``; a Topic whose Broker
is gone still deletes (its finalizer is released, the namespace never hangs)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from .operator_process import OperatorProcess, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "apps"


def topic_cr(name: str, broker: str = "events", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Topic",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"broker": broker, "partitions": 1, **spec}}


def ready(kube: Kube, name: str) -> tuple[str | None, str | None]:
    status = (kube.read("Topic", NS, name) or {}).get("status") or {}
    for condition in status.get("conditions") or ():
        if condition["type"] == "Ready":
            return condition["status"], condition["reason"]
    return None, None


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def partitions(admin: AdminClient, topic: str) -> int | None:
    found = admin.list_topics(timeout=5).topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def dynamic_config(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=5)
    return {k: e.value for k, e in entries.items()
            if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG}


@pytest.fixture(scope="module")
def with_broker_cr(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "events", "namespace": NS},
                 "spec": {"replicas": 1, "metadata": {"managed": True}}})
    yield


def test_topic_created_grown_reconfigured_and_deleted(
        kube: Kube, admin: AdminClient, operator: OperatorProcess, with_broker_cr: None) -> None:
    kube.create(topic_cr("orders", partitions=2, config={"retention.ms": 3600000}))
    wait_until(lambda: ready(kube, "orders") == ("True", "TopicReady"), 30, "TopicReady",
               operator.log_tail)
    assert partitions(admin, "orders") == 2
    assert dynamic_config(admin, "orders") == {"retention.ms": "3600000"}
    status = kube.read("Topic", NS, "orders")["status"]
    assert status["topicName"] == "orders" and status["partitions"] == 2

    kube.patch("Topic", NS, "orders", {"spec": {"partitions": 4, "config": {
        "retention.ms": None, "cleanup.policy": "compact"}}})
    wait_until(lambda: partitions(admin, "orders") == 4, 30, "4 partitions", operator.log_tail)
    wait_until(lambda: dynamic_config(admin, "orders") == {"cleanup.policy": "compact"}, 30,
               "config set and unset", operator.log_tail)
    wait_until(lambda: kube.read("Topic", NS, "orders")["status"].get("partitions") == 4, 30,
               "status.partitions", operator.log_tail)

    # A change made directly in the cluster is reverted on the timer.
    resource = ConfigResource("topic", "orders", incremental_configs=[
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=5)
    wait_until(lambda: dynamic_config(admin, "orders") == {"cleanup.policy": "compact"}, 30,
               "the direct change reverted", operator.log_tail)

    kube.delete("Topic", NS, "orders")
    wait_until(lambda: partitions(admin, "orders") is None, 30, "the topic deleted in Kafka",
               operator.log_tail)
    wait_until(lambda: kube.read("Topic", NS, "orders") is None, 60, "the Topic gone",
               operator.log_tail)


def test_two_topics_naming_one_topic_the_newer_gets_resource_conflict(
        kube: Kube, admin: AdminClient, operator: OperatorProcess, with_broker_cr: None) -> None:
    kube.create(topic_cr("payments", partitions=3))
    wait_until(lambda: ready(kube, "payments") == ("True", "TopicReady"), 30, "TopicReady",
               operator.log_tail)
    kube.create(topic_cr("payments-copy", topicName="payments", partitions=5))
    wait_until(lambda: ready(kube, "payments-copy") == ("False", "ResourceConflict"), 30,
               "ResourceConflict", operator.log_tail)
    assert ready(kube, "payments") == ("True", "TopicReady")
    assert partitions(admin, "payments") == 3  # the newer Topic changed nothing

    kube.delete("Topic", NS, "payments-copy")  # releasing the loser leaves the topic alone
    wait_until(lambda: kube.read("Topic", NS, "payments-copy") is None, 30, "the copy gone",
               operator.log_tail)
    assert partitions(admin, "payments") == 3


def test_finalizer_released_when_the_broker_is_gone(
        kube: Kube, operator: OperatorProcess) -> None:
    kube.create(topic_cr("orphan", broker="no-such-broker"))
    wait_until(lambda: ready(kube, "orphan") == ("False", "BrokerNotFound"), 30,
               "BrokerNotFound", operator.log_tail)
    assert "strata.dev/finalizer" in kube.read("Topic", NS, "orphan")["metadata"]["finalizers"]
    kube.delete("Topic", NS, "orphan")
    wait_until(lambda: kube.read("Topic", NS, "orphan") is None, 60, "the Topic gone",
               operator.log_tail)


def test_operator_serves_metrics_and_liveness(
        operator: OperatorProcess, with_broker_cr: None) -> None:
    def get(port: int, path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return str(answer.read().decode()) if answer.status == 200 else None
        except OSError:
            return None

    wait_until(lambda: get(operator.health_port, "/healthz"), 30, "kopf's liveness endpoint",
               operator.log_tail)

    def reconciled() -> bool:
        text = get(operator.metrics_port, "/metrics") or ""
        match = re.search(r'^strata_operator_reconciles_total\{kind="Topic"\} (\S+)$', text,
                          re.MULTILINE)
        return match is not None and float(match.group(1)) > 0

    wait_until(reconciled, 30, "Topic reconciles counted in /metrics", operator.log_tail)
