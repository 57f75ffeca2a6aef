"""The real operator loop against kmock for ``User`` resources, the Kafka side a real Strata
broker with a SCRAM listener and ACL authorization (``test_secured_broker_operator``'s broker:
``admin`` its super user and the Broker's inter-broker user).

A User with a generated password, ACLs and quotas: the Secret appears, confluent-kafka logs in
with it and is allowed or refused per the ACLs (a real producer, TOPIC_AUTHORIZATION_FAILED);
an ACL changed in the User is changed in Kafka; the quotas are what DescribeClientQuotas says;
deleting the User removes its credential (the login fails), its ACLs and its quotas.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.operator.kafka import KafkaCluster
from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from .kube_mock import KubeMock
from .operator_process import OperatorProcess, running_operator, wait_until
from .test_secured_broker_operator import (
    NS,
    broker_cr,
    can_log_in,
    scram_broker,
    secret,
)

__all__ = ["scram_broker"]  # the module-scoped broker fixture, shared

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(150)]

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, scram_broker: tuple[BrokerProcess, int],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    _, port = scram_broker
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}"}
                          ) as started:
        yield started


def sasl(port: int, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "log_level": 0}


def produce(port: int, user: str, password: str, topic: str) -> KafkaError | None:
    producer = Producer({**sasl(port, user, password), "message.timeout.ms": 10000})
    results: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return results[0]


def refused(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def user_ready(kube: Kube, name: str) -> tuple[str, str] | None:
    status = (kube.read("User", NS, name) or {}).get("status") or {}
    for condition in status.get("conditions") or ():
        if condition["type"] == "Ready":
            return condition["status"], condition["reason"]
    return None


def acl(topic: str, *operations: str, kind: str = "allow") -> dict[str, Any]:
    return {"resource": {"type": "topic", "name": topic}, "operations": list(operations),
            "type": kind}


@pytest.fixture(scope="module")
def cluster(kube: Kube, operator: OperatorProcess, scram_broker: tuple[BrokerProcess, int]
            ) -> KafkaCluster:
    _, port = scram_broker
    kube.create(secret("events-admin", password="admin-1"))
    kube.create(broker_cr([]))
    admin = AdminClient(sasl(port, "admin", "admin-1"))
    for future in admin.create_topics([NewTopic("orders", 1, 1),
                                       NewTopic("payments", 1, 1)]).values():
        future.result(timeout=TIMEOUT_S)
    return KafkaCluster(f"127.0.0.1:{port}", TIMEOUT_S,
                        {k: str(v) for k, v in sasl(port, "admin", "admin-1").items()
                         if k.startswith(("security", "sasl"))})


def test_user_lifecycle_with_acls_enforced_by_the_broker(
        kube: Kube, cluster: KafkaCluster, operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "User",
                 "metadata": {"name": "alice", "namespace": NS},
                 "spec": {"broker": "events", "authentication": {"type": "scram-sha-512"},
                          "authorization": {"acls": [acl("orders", "Write", "Describe"),
                                                     acl("payments", "Write", kind="deny")]},
                          "quotas": {"producerByteRate": 1048576, "requestPercentage": 50}}})
    wait_until(lambda: user_ready(kube, "alice") == ("True", "UserReady"), 60,
               "alice Ready", operator.log_tail)
    generated = kube.read("Secret", NS, "alice")
    assert generated is not None
    password = base64.b64decode(generated["data"]["password"]).decode()
    assert len(password) >= 24
    assert "ScramLoginModule" in base64.b64decode(generated["data"]["sasl.jaas.config"]).decode()
    # Brokers apply credentials and ACLs as their metadata catches up: polled, not assumed.
    wait_until(lambda: can_log_in(port, "alice", password), 30, "alice logs in",
               operator.log_tail)
    wait_until(lambda: produce(port, "alice", password, "orders") is None, 30,
               "orders allowed", operator.log_tail)
    assert refused(produce(port, "alice", password, "payments"))
    assert cluster.user_quotas("alice") == {"producer_byte_rate": 1048576.0,
                                            "request_percentage": 50.0}

    # The ACLs change: orders no longer, payments allowed.
    kube.patch("User", NS, "alice", {"spec": {
        "authorization": {"acls": [acl("payments", "Write", "Describe")]},
        "quotas": {"producerByteRate": None, "consumerByteRate": 2048}}})
    wait_until(lambda: produce(port, "alice", password, "payments") is None, 60,
               "payments allowed", operator.log_tail)
    wait_until(lambda: refused(produce(port, "alice", password, "orders")), 30,
               "orders refused", operator.log_tail)
    assert len(cluster.acls("User:alice")) == 2
    wait_until(lambda: cluster.user_quotas("alice") == {"consumer_byte_rate": 2048.0,
                                                        "request_percentage": 50.0},
               30, "the quotas changed", operator.log_tail)

    # Deleted: no login, no ACLs, no quotas.
    kube.delete("User", NS, "alice")
    wait_until(lambda: kube.read("User", NS, "alice") is None, 60, "the finalizer released",
               operator.log_tail)
    wait_until(lambda: not can_log_in(port, "alice", password), 30, "alice's login refused",
               operator.log_tail)
    assert cluster.acls("User:alice") == frozenset()
    assert cluster.user_quotas("alice") == {}
    assert kube.read("Secret", NS, "alice") is None


def test_a_user_with_its_own_password_secret_and_a_missing_one(
        kube: Kube, cluster: KafkaCluster, operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "User",
                 "metadata": {"name": "bob", "namespace": NS},
                 "spec": {"broker": "events", "authentication": {
                     "passwordSecret": {"name": "bob-pw"}}}})
    wait_until(lambda: user_ready(kube, "bob") == ("False", "SecretNotFound"), 60,
               "bob waiting for his Secret", operator.log_tail)
    kube.create(secret("bob-pw", password="bob-1"))
    wait_until(lambda: user_ready(kube, "bob") == ("True", "UserReady"), 60, "bob Ready",
               operator.log_tail)
    wait_until(lambda: can_log_in(port, "bob", "bob-1"), 30, "bob logs in", operator.log_tail)
    kube.delete("User", NS, "bob")
    wait_until(lambda: kube.read("User", NS, "bob") is None, 60, "bob deleted",
               operator.log_tail)
    wait_until(lambda: not can_log_in(port, "bob", "bob-1"), 30, "bob's login refused",
               operator.log_tail)
    assert kube.read("Secret", NS, "bob-pw") is not None  # not the operator's to delete
