"""Fixtures of the metadata-store contract suite: every test runs once per backend.

``store_url`` is a fresh SQLite file per test, or the session's one real etcd (started on free
loopback ports with a temp data dir the first time an etcd test needs it, stopped by PID at the
end). ``prefix`` is a key prefix unique to the test, so tests sharing the etcd never see each
other's keys. A missing etcd fails the etcd tests (``make test`` installs it); it never skips.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from strata.metadata import MetadataStore, open_store

from .etcd_process import MISSING, EtcdProcess, running_etcd

BACKENDS = ["sqlite", "etcd"]


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    try:
        EtcdProcess(tmp_path_factory.mktemp("etcd-probe"))
    except RuntimeError:
        pytest.fail(MISSING)
    with running_etcd(tmp_path_factory.mktemp("etcd")) as process:
        yield process


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    if backend == "etcd":
        process: EtcdProcess = request.getfixturevalue("etcd")
        return process.url
    return f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'meta.db'}"


@pytest.fixture
def prefix() -> str:
    return f"/strata-test/{uuid.uuid4().hex[:12]}/"


@pytest.fixture
async def open_stores(store_url: str) -> AsyncIterator[Callable[[], Awaitable[MetadataStore]]]:
    """Open more store instances on the test's URL; all closed after the test."""
    opened: list[MetadataStore] = []

    async def make() -> MetadataStore:
        store = open_store(store_url)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_stores: Callable[[], Awaitable[MetadataStore]]) -> MetadataStore:
    return await open_stores()
