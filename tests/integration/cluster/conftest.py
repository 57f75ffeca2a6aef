"""Fixtures of the cluster fault suite: every test runs once per metadata-store backend, each
on a cluster (and, for etcd, an etcd) of its own, killed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest

from .cluster_processes import ClusterProcesses, cluster_on


@pytest.fixture(params=["sqlite", "etcd"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_cluster(backend: str, tmp_path: Path
                 ) -> Iterator[Callable[..., ClusterProcesses]]:
    with ExitStack() as stack:

        def make(brokers: int = 3, overrides: Mapping[str, str] | None = None
                 ) -> ClusterProcesses:
            workdir = tmp_path / f"cluster-{len(stack._exit_callbacks)}"
            return stack.enter_context(cluster_on(backend, workdir, brokers, overrides))

        yield make
