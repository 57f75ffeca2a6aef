"""TLS users on a real broker: a Broker whose ``mtls`` listener takes client certificates
(``authentication: tls``) and whose certificates the operator makes gets a clients CA; a
``User`` with ``authentication.type: tls`` gets a client certificate ``CN=<userName>`` from it
in its Secret (``user.crt``, ``user.key``, ``ca.crt``), and its ACLs are written for
``User:CN=<userName>`` — the principal the broker derives from that certificate with Kafka's
default ``ssl.principal.mapping.rules``. A confluent-kafka producer with the issued
certificate may write where the ACLs allow and is refused elsewhere.

The real broker's SSL listener requires client certificates and runs the StandardAuthorizer;
its PLAINTEXT listener (the operator's, and the test's for creating topics) is anonymous, so
``User:ANONYMOUS`` is its super user here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.operator import certificates
from strata.operator.kube import Kube

from .kube_mock import KubeMock
from .operator_process import OperatorProcess, wait_until
from .tls_broker import (
    Pods,
    TlsBroker,
    running_operator_for,
    running_tls_broker,
    secret_data,
)

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "mtls"


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    with running_tls_broker(tmp_path_factory.mktemp("mtls-broker"), {
            "ssl.client.auth": "required",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "false"}
                            ) as broker:
        yield broker


@pytest.fixture(scope="module")
def mtls_operator(kube_mock: KubeMock, mtls_broker: TlsBroker,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator_for(tmp_path_factory.mktemp("operator"), kube_mock,
                              mtls_broker) as started:
        yield started


def user_cr(name: str, acls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "User",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"broker": "events", "authentication": {"type": "tls"},
                     "authorization": {"acls": acls}}}


def ready(kube: Kube, kind: str, name: str) -> tuple[str, str]:
    for item in ((kube.read(kind, NS, name) or {}).get("status") or {}).get("conditions") or ():
        if item.get("type") == "Ready":
            return item.get("status", ""), item.get("reason", "")
    return "", ""


@pytest.fixture(scope="module")
def alice(kube: Kube, mtls_operator: OperatorProcess, mtls_broker: TlsBroker) -> dict[str, str]:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "events", "namespace": NS},
                 "spec": {"replicas": 1, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                          "admin": {"enabled": False},
                          "listeners": {"plaintext": {"port": 9092},
                                        "mtls": {"port": 9094, "tls": True,
                                                 "authentication": {"type": "tls"}}},
                          "authorization": {"type": "simple"},
                          "tls": {"alternativeNames": ["127.0.0.1"]}}})
    wait_until(lambda: secret_data(kube, NS, "events-broker-certs").get("events-0.crt"), 30,
               "the broker certificates", mtls_operator.log_tail)
    wait_until(lambda: kube.read("StatefulSet", NS, "events"), 30, "the StatefulSet",
               mtls_operator.log_tail)
    Pods(kube, NS, mtls_broker).sync()  # the pod starts: the real broker with its Secret
    admin = AdminClient({"bootstrap.servers": mtls_broker.broker.bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic("orders", 1, 1),
                                       NewTopic("payroll", 1, 1)]).values():
        future.result(timeout=20)
    kube.create(user_cr("alice", [{"resource": {"type": "topic", "name": "orders"},
                                   "operations": ["Write", "Describe"]}]))
    wait_until(lambda: ready(kube, "User", "alice") == ("True", "UserReady"), 30,
               "alice Ready", mtls_operator.log_tail)
    return secret_data(kube, NS, "alice")


def deliver(port: int, user: dict[str, str], topic: str) -> KafkaError | None:
    """Produce one record with the user's certificate; the delivery error (None: written)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                         "ssl.ca.pem": user["ca.crt"], "ssl.certificate.pem": user["user.crt"],
                         "ssl.key.pem": user["user.key"], "message.timeout.ms": 15000,
                         "enable.idempotence": False, "log_level": 0})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def test_the_user_secret_holds_a_certificate_of_the_clients_ca(
        kube: Kube, alice: dict[str, str]) -> None:
    clients_ca = secret_data(kube, NS, "events-clients-ca")["ca.crt"]
    assert certificates.issued_by(alice["user.crt"], clients_ca)
    assert certificates.subject_of(alice["user.crt"]) == "CN=alice"
    assert alice["ca.crt"] == secret_data(kube, NS, "events-broker-certs")["ca.crt"]
    assert clients_ca in certificates.split_bundle(alice["ca.crt"])  # the brokers trust it


def test_the_user_acls_apply_to_its_certificate(
        kube: Kube, alice: dict[str, str], mtls_broker: TlsBroker) -> None:
    assert deliver(mtls_broker.ssl_port, alice, "orders") is None
    refused = deliver(mtls_broker.ssl_port, alice, "payroll")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
