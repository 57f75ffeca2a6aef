"""TLS users on a real broker: a Broker whose ``mtls`` listener takes client certificates
(``authentication: tls``) and whose certificates the operator makes gets a clients CA; a
``User`` with ``authentication.type: tls`` gets a client certificate ``CN=<userName>`` from it
in its Secret (``user.crt``, ``user.key``, ``ca.crt``), and its ACLs are written for
``User:CN=<userName>`` — the principal the broker derives from that certificate with Kafka's
default ``ssl.principal.mapping.rules``. A confluent-kafka producer with the issued
certificate may write where the ACLs allow and is refused elsewhere.

Then ``strata.dev/force-renew-clients-ca`` rotates the clients CA: alice's client, taking its
Secret at each restart, writes through both rolls (stage 2 re-issues its certificate without
a roll), while a client keeping the old certificate is refused once stage 3 rolls the old
clients CA out of the brokers' trust.

The real broker's SSL listener requires client certificates and runs the StandardAuthorizer;
its PLAINTEXT listener (the operator's, and the test's for creating topics) is anonymous, so
``User:ANONYMOUS`` is its super user here.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.operator import ca_rotation, certificates
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

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(180)]

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
def pods(kube: Kube, mtls_broker: TlsBroker) -> Pods:
    return Pods(kube, NS, mtls_broker)


@pytest.fixture(scope="module")
def alice(kube: Kube, mtls_operator: OperatorProcess, mtls_broker: TlsBroker,
          pods: Pods) -> dict[str, str]:
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
    pods.sync()  # the pod starts: the real broker with its Secret
    admin = AdminClient({"bootstrap.servers": mtls_broker.broker.bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic("orders", 1, 1),
                                       NewTopic("payroll", 1, 1)]).values():
        future.result(timeout=20)
    kube.create(user_cr("alice", [{"resource": {"type": "topic", "name": "orders"},
                                   "operations": ["Write", "Describe"]}]))
    wait_until(lambda: ready(kube, "User", "alice") == ("True", "UserReady"), 30,
               "alice Ready", mtls_operator.log_tail)
    return secret_data(kube, NS, "alice")


def deliver(port: int, user: dict[str, str], topic: str,
            timeout_ms: int = 15000) -> KafkaError | None:
    """Produce one record with the user's certificate; the delivery error (None: written)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                         "ssl.ca.pem": user["ca.crt"], "ssl.certificate.pem": user["user.crt"],
                         "ssl.key.pem": user["user.key"], "message.timeout.ms": timeout_ms,
                         "enable.idempotence": False, "log_level": 0})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def certificate_refused(port: int, user: dict[str, str], directory: Path) -> bool:
    """The broker drops a TLS connection presenting the user's certificate (True), or keeps it
    open waiting for a request (False). With TLS 1.3 the client's handshake ends before the
    server has checked the client certificate, so a refusal shows on the first read."""
    (directory / "user.pem").write_text(user["user.crt"] + user["user.key"])
    context = ssl.create_default_context(cadata=user["ca.crt"])
    context.check_hostname = False
    context.load_cert_chain(str(directory / "user.pem"))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw) as conn:
        conn.settimeout(2)
        try:
            return conn.recv(1) == b""  # closed: refused
        except TimeoutError:
            return False  # the broker waits for a request: accepted
        except (ssl.SSLError, ConnectionError):
            return True


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


def test_clients_ca_rotation_reissues_user_certificates_and_then_refuses_the_old_ones(
        kube: Kube, alice: dict[str, str], mtls_broker: TlsBroker, pods: Pods,
        mtls_operator: OperatorProcess, tmp_path: Path) -> None:
    """Last in the module: it replaces alice's certificate. Stage 1 rolls the broker to trust
    old + new clients CA, stage 2 re-issues alice's certificate (no roll), stage 3 rolls the
    old CA out: alice's client, taking its Secret at each restart, writes throughout; a
    client keeping the old certificate writes until stage 3 and is refused from then on."""
    old_ca = secret_data(kube, NS, "events-clients-ca")["ca.crt"]
    probes: list[tuple[str, bool, bool, bool]] = []

    def probe(_data: dict[str, str]) -> None:
        current = secret_data(kube, NS, "alice")
        clients = secret_data(kube, NS, "events-clients-ca")
        new_ca = clients.get("next.crt") or clients["ca.crt"]
        issuer = "new" if certificates.issued_by(current["user.crt"], new_ca) else "old"
        probes.append((issuer, deliver(mtls_broker.ssl_port, current, "orders") is None,
                       deliver(mtls_broker.ssl_port, alice, "orders", 4000) is None,
                       certificate_refused(mtls_broker.ssl_port, alice, tmp_path)))

    def rotation() -> str:
        return str(((kube.read("Broker", NS, "events") or {}).get("status") or {}).get(
            "certificates", {}).get("clientsCaRotation"))

    def reasons() -> list[str]:
        return [e.get("reason", "") for e in sorted(
            kube.list("Event", NS), key=lambda e: e["metadata"].get("creationTimestamp", ""))]

    restarts = pods.restarts
    pods.on_restart = probe
    kube.patch("Broker", NS, "events", {"metadata": {"annotations": {
        ca_rotation.CLIENTS.force_annotation: "true"}}})

    def complete() -> bool:
        pods.sync()
        return ca_rotation.CLIENTS.complete_reason in reasons() and rotation() == ""

    wait_until(complete, 60, "the clients CA rotation to complete", mtls_operator.log_tail)
    # Two rolls (stages 1 and 3); by stage 3 alice's certificate is the new CA's and the old
    # one is refused at the TLS handshake. (Right after roll 1 alice may already have been
    # re-issued: the operator moves on to stage 2 once the pod is ready.)
    assert pods.restarts - restarts == 2
    assert probes[0][1:] == (True, True, False) and probes[1] == ("new", True, False, True)
    new_ca = secret_data(kube, NS, "events-clients-ca")["ca.crt"]
    assert new_ca != old_ca
    current = secret_data(kube, NS, "alice")
    assert certificates.issued_by(current["user.crt"], new_ca)
    assert certificates.split_bundle(current["ca.crt"]).count(old_ca) == 0
    assert deliver(mtls_broker.ssl_port, current, "orders") is None
    assert [r for r in reasons() if "ClientsCa" in r] == [
        ca_rotation.CLIENTS.event_reason] * 3 + [ca_rotation.CLIENTS.complete_reason]
    broker = kube.read("Broker", NS, "events") or {}
    assert ca_rotation.CLIENTS.force_annotation not in broker["metadata"].get(
        "annotations", {})
