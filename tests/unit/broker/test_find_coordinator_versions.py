"""FindCoordinator v0-v6 on the wire: one key (v0-v3) or a batch (v4+, KIP-699)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import fresh_state, round_trip, served


def test_every_version_kio_has_is_served() -> None:
    assert served(ApiKey.FIND_COORDINATOR) == range(0, 7)


@pytest.mark.parametrize("version", served(ApiKey.FIND_COORDINATOR))
async def test_coordinator_of_groups_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        address = (state.node_id, state.advertised_host, state.advertised_port)
        if version < 4:
            answer = await round_trip(state, ApiKey.FIND_COORDINATOR, version,
                                      {"key": "orders", "key_type": 0})
            assert answer.error_code == ErrorCode.none
            assert (answer.node_id, answer.host, answer.port) == address
            return
        answer = await round_trip(state, ApiKey.FIND_COORDINATOR, version, {
            "key_type": 0, "coordinator_keys": ["orders", "", "billing"]})
        # One answer per key, in request order, each with its own error.
        assert [(c.key, c.error_code) for c in answer.coordinators] == [
            ("orders", ErrorCode.none), ("", ErrorCode.invalid_group_id),
            ("billing", ErrorCode.none)]
        orders, empty, billing = answer.coordinators
        assert (orders.node_id, orders.host, orders.port) == address
        assert (billing.node_id, billing.host, billing.port) == address
        assert (empty.node_id, empty.host, empty.port) == (-1, "", -1)
        assert empty.error_message and orders.error_message is None


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_batched_transactional_ids_have_this_coordinator(tmp_path: Path,
                                                               version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await state.transaction_coordinator.startup(run_timers=False)
        try:
            answer = await round_trip(state, ApiKey.FIND_COORDINATOR, version, {
                "key_type": 1, "coordinator_keys": ["tx-1", "", "tx-2"]})
        finally:
            await state.transaction_coordinator.shutdown()
        assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
            ("tx-1", ErrorCode.none, state.node_id), ("", ErrorCode.invalid_request, -1),
            ("tx-2", ErrorCode.none, state.node_id)]
        assert state.topic_store.get("__transaction_state") is not None


async def test_v6_share_keys_are_invalid_requests(tmp_path: Path) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.FIND_COORDINATOR, 6, {
            "key_type": 2, "coordinator_keys": ["g:AAAAAAAAAAAAAAAAAAAAAA:0"]})
        (coordinator,) = answer.coordinators
        assert coordinator.error_code == ErrorCode.invalid_request
        assert "share" in (coordinator.error_message or "")


async def test_an_empty_batch_gets_an_empty_answer(tmp_path: Path) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.FIND_COORDINATOR, 4,
                                  {"key_type": 0, "coordinator_keys": []})
        assert answer.coordinators == ()
