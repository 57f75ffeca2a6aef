"""Fixtures of the admin API tests: one real broker and one real ``strata admin`` shared by the
package's modules (each uses names of its own); the OpenAPI fuzz, which creates and alters
whatever it draws, runs on a pair of its own (``isolated_admin``).

The broker runs group-friendly settings (no initial rebalance delay, a small
``__consumer_offsets``) so consumer groups form at once; the admin service is the real process
on a free loopback port, and ``api`` is an httpx client for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import httpx
import pytest

from ..broker_process import BrokerProcess, running_broker
from .admin_process import AdminProcess, running_admin

BROKER_SETTINGS: Final = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture(scope="package")
def admin_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"), BROKER_SETTINGS) as started:
        yield started


@pytest.fixture(scope="package")
def admin_service(tmp_path_factory: pytest.TempPathFactory,
                  admin_broker: BrokerProcess) -> Iterator[AdminProcess]:
    with running_admin(tmp_path_factory.mktemp("admin"), admin_broker.bootstrap) as started:
        yield started


@pytest.fixture(scope="package")
def api(admin_service: AdminProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=admin_service.url, timeout=30.0) as client:
        yield client


@pytest.fixture(scope="module")
def isolated_admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProcess]:
    """A broker and an admin service of the module's own."""
    with running_broker(tmp_path_factory.mktemp("broker"), BROKER_SETTINGS) as broker, \
            running_admin(tmp_path_factory.mktemp("admin"), broker.bootstrap) as started:
        yield started
