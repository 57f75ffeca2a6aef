"""DeleteGroups v0-v2 on the wire (v2 flexible)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import fresh_state, joined_member, round_trip, served, simple_group


def test_every_version_kio_has_is_served() -> None:
    assert served(ApiKey.DELETE_GROUPS) == range(0, 3)


@pytest.mark.parametrize("version", served(ApiKey.DELETE_GROUPS))
async def test_delete_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await joined_member(state, 5, instance="host-a")
        await simple_group(state)
        answer = await round_trip(state, ApiKey.DELETE_GROUPS, version,
                                  {"groups_names": ["g", "simple", "nope", "simple"]})
        assert [(r.group_id, r.error_code) for r in answer.results] == [
            ("g", ErrorCode.non_empty_group), ("simple", ErrorCode.none),
            ("nope", ErrorCode.group_id_not_found)]
        listed = await round_trip(state, ApiKey.LIST_GROUPS, 5,
                                  {"states_filter": [], "types_filter": []})
        assert [g.group_id for g in listed.groups] == ["g"]
