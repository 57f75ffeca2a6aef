"""DescribeCluster v0-1: cluster id, controller and brokers; controllers' endpoints refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.handlers.describe_cluster import handle
from strata.protocol import ApiKey, encode_response
from strata.protocol.error_codes import ErrorCode

from .helpers import broker_state, context, request


@pytest.mark.parametrize("version", [0, 1])
async def test_brokers_and_controller(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path, broker_rack="r1")
    ctx = context(state, ApiKey.DESCRIBE_CLUSTER, version)
    response = await handle(ctx, request(ApiKey.DESCRIBE_CLUSTER, version,
                                         include_cluster_authorized_operations=False,
                                         endpoint_type=1))
    encode_response(ctx.header, response)
    assert (response.error_code, response.cluster_id, response.controller_id) == (0, "c-1", 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "127.0.0.1", 9092, "r1")]


async def test_controller_endpoints_are_not_served_by_brokers(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    ctx = context(state, ApiKey.DESCRIBE_CLUSTER, 1)
    response = await handle(ctx, request(ApiKey.DESCRIBE_CLUSTER, 1,
                                         include_cluster_authorized_operations=False,
                                         endpoint_type=2))
    encode_response(ctx.header, response)
    assert response.error_code == ErrorCode.unsupported_endpoint_type
    assert (response.controller_id, response.brokers) == (-1, ())
