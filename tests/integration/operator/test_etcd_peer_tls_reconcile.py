"""The managed etcd's peer mode through the Broker reconcile pass (``broker.reconcile``) against
the mock API server: a Broker created with a TLS listener gets an etcd with https peers (the
mode recorded on ``<b>-etcd-certs`` and, once the StatefulSet controller made it, on member 0's
claim); a Broker whose plain etcd runs before its first TLS listener gets https clients but
keeps plain peers, and says so in an Event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.operator import broker, etcd_tls
from strata.operator.kube import Kube

from .kube_mock import StatefulSetController, running_kube_mock
from .test_broker_reconcile import FakeCluster

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(60)]

NS = "etcdpeers"
TLS = {"tls": {"port": 9093, "tls": True}}


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    with running_kube_mock(tmp_path) as mock:
        yield mock.client()


def create(kube: Kube, listeners: dict[str, Any] | None) -> None:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "b", "namespace": NS},
                 "spec": {"replicas": 1, "metadata": {"managed": True},
                          "admin": {"enabled": False},
                          **({"listeners": listeners} if listeners else {})}})


def reconcile(kube: Kube) -> None:
    body = kube.read("Broker", NS, "b")
    assert body is not None
    cluster = FakeCluster()
    broker.reconcile(body, kube, lambda bootstrap, client_config: cluster)


def etcd_script(kube: Kube) -> str:
    sts = kube.read("StatefulSet", NS, "b-etcd")
    assert sts is not None
    return str(sts["spec"]["template"]["spec"]["containers"][0]["command"][-1])


def annotation(kube: Kube, kind: str, name: str) -> str | None:
    obj = kube.read(kind, NS, name)
    assert obj is not None
    return ((obj["metadata"].get("annotations") or {}).get(etcd_tls.PEER_TLS_ANNOTATION))


def etcd_events(kube: Kube) -> list[str]:
    return [e["reason"] for e in kube.list("Event", NS) if e["reason"].startswith("Etcd")]


def test_a_broker_created_with_tls_gets_an_etcd_with_tls_peers(kube: Kube) -> None:
    create(kube, TLS)
    reconcile(kube)
    script = etcd_script(kube)
    assert "--listen-peer-urls=https://" in script and " --peer-client-cert-auth" in script
    assert "--initial-cluster=b-etcd-0=https://" in script
    assert annotation(kube, "Secret", "b-etcd-certs") == "true"
    StatefulSetController(kube, NS).sync()  # makes the pods and their claims
    reconcile(kube)
    assert annotation(kube, "PersistentVolumeClaim", "data-b-etcd-0") == "true"
    assert "--listen-peer-urls=https://" in etcd_script(kube)
    assert etcd_events(kube) == []


def test_a_plain_etcd_keeps_plain_peers_when_tls_comes(kube: Kube) -> None:
    create(kube, None)
    reconcile(kube)
    StatefulSetController(kube, NS).sync()
    assert "--listen-peer-urls=http://" in etcd_script(kube)
    kube.patch("Broker", NS, "b", {"spec": {"listeners": TLS}})
    reconcile(kube)
    script = etcd_script(kube)
    assert "--listen-client-urls=https://" in script and " --client-cert-auth" in script
    assert "--listen-peer-urls=http://" in script and "--peer-" not in script
    assert annotation(kube, "Secret", "b-etcd-certs") == "false"
    assert annotation(kube, "PersistentVolumeClaim", "data-b-etcd-0") == "false"
    reconcile(kube)
    assert etcd_events(kube) == [etcd_tls.PEERS_PLAIN]  # once
