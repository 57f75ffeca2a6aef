"""FindCoordinator v0-v2 on a single broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.handlers.find_coordinator import handle
from strata.protocol import ApiKey, encode_response

from .helpers import broker_state, context, request


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_group_coordinator_is_this_broker(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    fields = {"key": "orders-app", "key_type": 0}
    ctx = context(state, ApiKey.FIND_COORDINATOR, version)
    response = await handle(ctx, request(ApiKey.FIND_COORDINATOR, version, **fields))
    encode_response(ctx.header, response)
    assert response.error_code == 0
    assert (response.node_id, response.host, response.port) == (
        state.node_id, state.advertised_host, state.advertised_port)


@pytest.mark.parametrize(("key", "key_type", "code"), [("", 0, 24), ("", 1, 42),
                                                        ("g", 9, 42)])
async def test_refusals(tmp_path: Path, key: str, key_type: int, code: int) -> None:
    state = broker_state(tmp_path)
    ctx = context(state, ApiKey.FIND_COORDINATOR, 1)
    response = await handle(ctx, request(ApiKey.FIND_COORDINATOR, 1, key=key, key_type=key_type))
    encode_response(ctx.header, response)
    assert response.error_code == code and response.node_id == -1
    assert response.error_message
