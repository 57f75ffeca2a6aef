"""Fixtures of the operator suite: per module, one mock API server, one real Strata broker
(the parent conftest's ``broker``) and the operator process pointed at both; the modules that
need several brokers ask for ``cluster`` (three on one SQLite store) and point their own
``operator`` at it. A failing test's report gets the operator's log tail."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from strata.operator.kube import Kube

from ..broker_process import BrokerProcess
from ..cluster.cluster_processes import ClusterProcesses, cluster_on
from .kube_mock import KubeMock, running_kube_mock
from .operator_process import OperatorProcess, running_operator


@pytest.fixture(scope="module")
def kube_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeMock]:
    with running_kube_mock(tmp_path_factory.mktemp("kmock")) as mock:
        yield mock


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with cluster_on("sqlite", tmp_path_factory.mktemp("cluster"), 3) as started:
        yield started


@pytest.fixture(scope="module")
def kube(kube_mock: KubeMock) -> Kube:
    return kube_mock.client()


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, broker: BrokerProcess,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": broker.bootstrap}) as started:
        yield started


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        operator = getattr(item, "funcargs", {}).get("operator")
        if isinstance(operator, OperatorProcess):
            report.sections.append(("operator log", operator.log_tail()))
    return report
