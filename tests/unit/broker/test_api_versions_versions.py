"""ApiVersions v0-4 through the wire path: the registry's list, and the KIP-584 feature fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers import build_registry, served_versions
from strata.broker.handlers.api_versions import SUPPORTED_FEATURES
from strata.protocol.api_keys import ApiKey

from .helpers import broker_state
from .wire_round_trip import round_trip

FIELDS = {"client_software_name": "strata-tests", "client_software_version": "1.0"}


def test_the_newest_version_kio_knows_is_served() -> None:
    assert served_versions()[ApiKey.API_VERSIONS].max_version == 4


@pytest.mark.parametrize("version", served_versions()[ApiKey.API_VERSIONS].versions())
async def test_every_version_lists_the_registry(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    response = await round_trip(state, ApiKey.API_VERSIONS, version, FIELDS,
                                unknown_tag=version >= 3)
    assert response.error_code == 0
    listed = {int(e.api_key): (int(e.min_version), int(e.max_version))
              for e in response.api_keys}
    # what is advertised: the served ranges, Produce from v0 (KIP-896, removed but listed)
    assert listed == {int(k): (r.min_version, r.max_version)
                      for k, r in build_registry().version_ranges().items()}


def finalized(response: Any) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_version_level, f.max_version_level)
            for f in response.finalized_features}


async def test_v3_carries_no_feature_starting_at_level_zero(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    response = await round_trip(state, ApiKey.API_VERSIONS, 3, FIELDS)
    assert all(levels.min_version == 0 for levels in SUPPORTED_FEATURES.values())
    assert response.supported_features == ()
    assert finalized(response) == {"transaction.version": (2, 2)}
    assert response.finalized_features_epoch == state.started_ms > 0
    assert response.zk_migration_ready is False


async def test_v4_lists_every_supported_feature(tmp_path: Path) -> None:
    response = await round_trip(broker_state(tmp_path), ApiKey.API_VERSIONS, 4, FIELDS,
                                unknown_tag=True)
    assert {f.name: (f.min_version, f.max_version) for f in response.supported_features} == {
        "group.version": (0, 0), "transaction.version": (0, 2)}
    assert finalized(response) == {"transaction.version": (2, 2)}


@pytest.mark.parametrize(("level", "listed"), [("0", {}), ("1", {"transaction.version": (1, 1)})])
async def test_the_finalized_transaction_version_is_the_broker_setting(
        tmp_path: Path, level: str, listed: dict[str, tuple[int, int]]) -> None:
    response = await round_trip(broker_state(tmp_path, transaction_version=level),
                                ApiKey.API_VERSIONS, 4, FIELDS)
    assert finalized(response) == listed
    assert (response.finalized_features_epoch == -1) == (not listed)


async def test_a_bad_software_name_is_invalid_request_with_the_list(tmp_path: Path) -> None:
    response = await round_trip(broker_state(tmp_path), ApiKey.API_VERSIONS, 4,
                                {"client_software_name": "-bad", "client_software_version": "1"})
    assert response.error_code == 42
    assert len(response.api_keys) == len(served_versions())
