"""Operator-made certificates on a real broker: the real operator (kmock) makes the cluster CA
and the broker certificates for a Broker with a TLS listener and no ``tls.secretName``; a real
Strata broker is started from that Secret exactly as the pod's entrypoint would (``<pod>.crt``
+ ``<pod>.key`` as the PEM keystore, ``ca.crt`` as the truststore) and restarted from it each
time the operator rolls the pod (the stand-in StatefulSet controller recreates it).

A confluent-kafka client trusting the CA connects over TLS (hostname verification on: the
certificate names 127.0.0.1 through ``tls.alternativeNames``). Then ``strata.dev/force-renew-ca``
starts a CA rotation: the three stages each roll the broker once and are posted as Events, and
a client that trusts the bundle of stage 1 (old + new CA) connects after every roll, while a
client trusting only the old CA stops at stage 2 and one trusting only the new CA starts there:
no client that follows the Secret loses the cluster for more than one roll.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from strata.operator import ca_rotation, certificates
from strata.operator.kube import Kube

from .kube_mock import KubeMock
from .operator_process import OperatorProcess, wait_until
from .tls_broker import (
    POD,
    Pods,
    TlsBroker,
    running_operator_for,
    running_tls_broker,
    tls_connects,
)
from .tls_broker import secret_data as _secret_data

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(180)]

NS = "certs"


def secret_data(kube: Kube, name: str) -> dict[str, str]:
    return _secret_data(kube, NS, name)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    with running_tls_broker(tmp_path_factory.mktemp("tls-broker")) as broker:
        yield broker


@pytest.fixture(scope="module")
def cert_operator(kube_mock: KubeMock, tls_broker: TlsBroker,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator_for(tmp_path_factory.mktemp("operator"), kube_mock,
                              tls_broker) as started:
        yield started


def broker_cr() -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
            "metadata": {"name": "events", "namespace": NS},
            "spec": {"replicas": 1, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                     "admin": {"enabled": False},
                     "listeners": {"plaintext": {"port": 9092},
                                   "tls": {"port": 9093, "tls": True}},
                     "tls": {"alternativeNames": ["127.0.0.1", "localhost"]}}}


@pytest.fixture(scope="module")
def pods(kube: Kube, cert_operator: OperatorProcess, tls_broker: TlsBroker) -> Pods:
    kube.create(broker_cr())
    wait_until(lambda: secret_data(kube, "events-broker-certs").get(f"{POD}.crt"), 30,
               "the broker certificates", cert_operator.log_tail)
    wait_until(lambda: kube.read("StatefulSet", NS, "events"), 30, "the StatefulSet",
               cert_operator.log_tail)
    started = Pods(kube, NS, tls_broker)
    started.sync()
    assert started.restarts == 1
    return started


def status(kube: Kube) -> dict[str, Any]:
    return (kube.read("Broker", NS, "events") or {}).get("status") or {}


def event_reasons(kube: Kube) -> list[str]:
    return [e.get("reason", "") for e in sorted(
        kube.list("Event", NS), key=lambda e: e["metadata"].get("creationTimestamp", ""))]


def test_a_client_trusting_the_operator_ca_connects_over_tls(
        kube: Kube, pods: Pods, tls_broker: TlsBroker) -> None:
    data = secret_data(kube, "events-broker-certs")
    ca = secret_data(kube, "events-cluster-ca")["ca.crt"]
    assert data["ca.crt"] == ca
    assert certificates.issued_by(data[f"{POD}.crt"], ca)
    assert "events-0.events-brokers.certs.svc" in certificates.sans_of(data[f"{POD}.crt"])
    assert tls_connects(tls_broker.ssl_port, ca)
    stranger = certificates.new_ca("stranger", datetime.datetime.now(datetime.UTC),
                                   datetime.timedelta(days=1))
    assert not tls_connects(tls_broker.ssl_port, stranger.cert)


def test_ca_rotation_rolls_in_three_stages_without_losing_bundle_clients(
        kube: Kube, pods: Pods, tls_broker: TlsBroker, cert_operator: OperatorProcess) -> None:
    old_ca = secret_data(kube, "events-cluster-ca")["ca.crt"]
    rolls: list[tuple[str, str, bool, bool, bool]] = []

    def probe_clients(data: dict[str, str]) -> None:
        """Right after each restart: what the broker serves and which clients get in."""
        ca_secret = secret_data(kube, "events-cluster-ca")
        new_ca = ca_secret.get("next.crt") or ca_secret["ca.crt"]
        assert new_ca != old_ca
        bundle = certificates.bundle([old_ca, new_ca])
        trusted = set(certificates.split_bundle(data["ca.crt"]))
        trust = ("old+new" if trusted == {old_ca, new_ca} else
                 "new" if trusted == {new_ca} else "?")
        issuer = "new" if certificates.issued_by(data[f"{POD}.crt"], new_ca) else "old"
        rolls.append((trust, issuer, tls_connects(tls_broker.ssl_port, bundle),
                      tls_connects(tls_broker.ssl_port, old_ca),
                      tls_connects(tls_broker.ssl_port, new_ca)))

    pods.on_restart = probe_clients
    kube.patch("Broker", NS, "events", {"metadata": {"annotations": {
        ca_rotation.FORCE_RENEW_ANNOTATION: "true"}}})

    def complete() -> bool:
        pods.sync()
        return ca_rotation.COMPLETE in event_reasons(kube) and \
            status(kube).get("certificates", {}).get("caRotation") == ""  # after the Event

    wait_until(complete, 90, "the CA rotation to complete", cert_operator.log_tail)
    # One roll per stage; a client trusting the bundle never fails, the old CA's clients stop
    # at stage 2 (certificates re-issued), the new CA's start there.
    assert rolls == [("old+new", "old", True, True, False),
                     ("old+new", "new", True, False, True),
                     ("new", "new", True, False, True)]
    reasons = event_reasons(kube)
    assert [r for r in reasons if r in ("CaRotation", ca_rotation.COMPLETE)] == [
        "CaRotation"] * 3 + [ca_rotation.COMPLETE]
    broker = kube.read("Broker", NS, "events") or {}
    assert ca_rotation.FORCE_RENEW_ANNOTATION not in broker["metadata"].get("annotations", {})
    assert set(secret_data(kube, "events-cluster-ca")) == {"ca.crt", "ca.key"}
