"""Two operator replicas as the chart runs them (``kopf run -A --peering=strata``) against the
mock API server and a real broker: the one of higher priority does all the work (kopf's
handlers and the operator's own Broker loop); the other stands by, touching nothing, and takes
over once the first is gone (drift repaired by it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from .kube_mock import KubeMock
from .operator_process import OperatorProcess, running_operator, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "peers"
PEERING = ("-A", "--peering=strata")


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, kube: Kube) -> Iterator[None]:
    """No standalone operator in this module: the test starts its replicas itself."""
    kube.create({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                 "metadata": {"name": "strata"}})
    yield None


def replica(tmp: Path, kube_mock: KubeMock, broker: BrokerProcess, priority: int
            ) -> AbstractContextManager[OperatorProcess]:
    return running_operator(tmp, kube_mock.kubeconfig,
                            {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": broker.bootstrap,
                             "STRATA_OPERATOR_PEERING_PRIORITY": str(priority)},
                            PEERING)


def acted(operator: OperatorProcess) -> list[str]:
    return [line for line in operator.log_tail(10_000).splitlines()
            if f"{NS}/" in line and (" created" in line or " patched" in line)]


def repaired(kube: Kube, by: OperatorProcess) -> None:
    kube.delete("ConfigMap", NS, "led-config")
    wait_until(lambda: kube.read("ConfigMap", NS, "led-config"), 30, "the ConfigMap recreated",
               by.log_tail)


def test_a_higher_priority_replica_takes_over_and_hands_back(
        kube_mock: KubeMock, kube: Kube, operator: None, broker: BrokerProcess,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    with replica(tmp_path_factory.mktemp("low"), kube_mock, broker, 100) as low:
        kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                     "metadata": {"name": "led", "namespace": NS},
                     "spec": {"replicas": 1, "admin": {"enabled": False},
                              "metadata": {"etcd": {"endpoints": ["etcd:2379"]}}}})
        wait_until(lambda: kube.read("StatefulSet", NS, "led"), 30, "the StatefulSet",
                   low.log_tail)
        assert acted(low)
        with replica(tmp_path_factory.mktemp("high"), kube_mock, broker, 200) as high:
            wait_until(lambda: "Pausing operations in favour of" in low.log_tail(10_000), 30,
                       "the lower priority to stand by", low.log_tail)
            before = len(acted(low))
            # Drift, three times: the Broker loop of the standby (1 s) would race the other.
            for _ in range(3):
                repaired(kube, high)
            assert len(acted(low)) == before, low.log_tail()
            assert acted(high)
        # The working replica is gone (it left the peering object on its way out).
        wait_until(lambda: "Resuming operations" in low.log_tail(10_000), 30,
                   "the standby to resume", low.log_tail)
        repaired(kube, low)
        assert len(acted(low)) > before
