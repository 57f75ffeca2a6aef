"""ListGroups v0-v5 on the wire: v4 states (KIP-518), v5 types (KIP-848: "classic")."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import fresh_state, joined_member, round_trip, served, simple_group


def test_every_version_kio_has_is_served() -> None:
    assert served(ApiKey.LIST_GROUPS) == range(0, 6)


@pytest.mark.parametrize("version", served(ApiKey.LIST_GROUPS))
async def test_list_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await joined_member(state, 5, instance="host-a")
        await simple_group(state)
        answer = await round_trip(state, ApiKey.LIST_GROUPS, version,
                                  {"states_filter": [], "types_filter": []})
        assert answer.error_code == ErrorCode.none
        assert sorted((g.group_id, g.protocol_type) for g in answer.groups) == [
            ("g", "consumer"), ("simple", "")]
        if version >= 4:
            assert sorted((g.group_id, g.group_state) for g in answer.groups) == [
                ("g", "Stable"), ("simple", "Empty")]
            stable = await round_trip(state, ApiKey.LIST_GROUPS, version,
                                      {"states_filter": ["STABLE"], "types_filter": []})
            assert [g.group_id for g in stable.groups] == ["g"]
        if version >= 5:
            assert {g.group_type for g in answer.groups} == {"classic"}


@pytest.mark.parametrize(("types", "listed"), [
    (["classic"], ["g", "simple"]),
    (["Classic", "consumer"], ["g", "simple"]),
    (["consumer"], []),
    (["share", "streams"], []),
])
async def test_v5_filters_on_the_group_type(tmp_path: Path, types: list[str],
                                            listed: list[str]) -> None:
    async with fresh_state(tmp_path) as state:
        await joined_member(state, 5, instance="host-a")
        await joined_member(state, 5, instance="host-b", group_id="simple")
        answer = await round_trip(state, ApiKey.LIST_GROUPS, 5,
                                  {"states_filter": [], "types_filter": types})
        assert sorted(g.group_id for g in answer.groups) == listed
        both = await round_trip(state, ApiKey.LIST_GROUPS, 5,
                                {"states_filter": ["empty"], "types_filter": types})
        assert both.groups == ()
