"""DescribeCluster v0-2 through the wire path: v2's ``is_fenced`` per broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey

from .helpers import broker_state
from .wire_round_trip import round_trip

VERSIONS = served_versions()[ApiKey.DESCRIBE_CLUSTER].versions()


def test_the_newest_version_kio_knows_is_served() -> None:
    assert range(0, 3) == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path, broker_rack="r1")
    response = await round_trip(state, ApiKey.DESCRIBE_CLUSTER, version, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1,
        "include_fenced_brokers": True}, unknown_tag=True)
    assert (response.error_code, response.cluster_id, response.controller_id) == (0, "c-1", 1)
    (broker,) = response.brokers
    assert (broker.broker_id, broker.host, broker.port, broker.rack) == (
        1, "127.0.0.1", 9092, "r1")
    if version >= 2:
        assert broker.is_fenced is False
