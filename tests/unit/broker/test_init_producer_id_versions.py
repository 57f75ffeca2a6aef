"""InitProducerId v0-6 through the wire path: KIP-360's producer id and epoch from v3."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import is_flexible

from .helpers import broker_state, group_broker_state
from .wire_round_trip import round_trip

VERSIONS = served_versions()[ApiKey.INIT_PRODUCER_ID].versions()


def init(transactional_id: str | None = None, producer_id: int = -1,
         producer_epoch: int = -1) -> dict[str, object]:
    return {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
            "producer_id": producer_id, "producer_epoch": producer_epoch}


def test_served_up_to_v6() -> None:
    assert range(0, 7) == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_hands_out_increasing_ids(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    flexible = is_flexible(ApiKey.INIT_PRODUCER_ID, version)
    first = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, init(),
                             unknown_tag=flexible)
    second = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, init())
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert second.producer_id > first.producer_id >= 0


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_an_epoch_bump_of_an_idempotent_producer_gets_a_new_id(tmp_path: Path,
                                                                     version: int) -> None:
    state = broker_state(tmp_path)
    first = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, init())
    bumped = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version,
                              init(producer_id=first.producer_id, producer_epoch=0))
    assert bumped.error_code == 0
    assert (bumped.producer_id > first.producer_id, bumped.producer_epoch) == (True, 0)


@pytest.mark.parametrize(("producer_id", "producer_epoch"), [(-1, 3), (17, -1)])
async def test_half_an_id_and_epoch_is_invalid_request(tmp_path: Path, producer_id: int,
                                                       producer_epoch: int) -> None:
    response = await round_trip(broker_state(tmp_path), ApiKey.INIT_PRODUCER_ID, 5,
                                init(producer_id=producer_id, producer_epoch=producer_epoch))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (42, -1, -1)


@pytest.mark.parametrize("version", VERSIONS)
async def test_transactional_ids_get_an_id_and_a_bumped_epoch(tmp_path: Path,
                                                              version: int) -> None:
    state = group_broker_state(tmp_path, transaction_state_log_num_partitions="1")
    runtime = state.transaction_coordinator
    await runtime.startup(run_timers=False)
    try:
        assert await runtime.ensure_topic() == 0
        await runtime.wait_loaded()
        first = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, init("tx-1"))
        again = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, init("tx-1"))
        assert (first.error_code, first.producer_epoch) == (0, 0) and first.producer_id >= 0
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            0, first.producer_id, 1)
        if version >= 6:  # KIP-939 two-phase commit: not enabled, as in a default Kafka
            two_pc = await round_trip(state, ApiKey.INIT_PRODUCER_ID, version,
                                      {**init("tx-1"), "enable2_pc": True})
            assert two_pc.error_code == ErrorCode.transactional_id_authorization_failed
    finally:
        await runtime.shutdown()
