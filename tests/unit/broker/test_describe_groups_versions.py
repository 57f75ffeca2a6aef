"""DescribeGroups v0-v6 on the wire: v3+ authorized operations, v4+ instance ids, v5 flexible,
v6 GROUP_ID_NOT_FOUND with a message for an unknown group (KIP-1043)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import SUBSCRIPTION, fresh_state, joined_member, round_trip, served

NOT_REQUESTED = -(2**31)


def test_every_version_kio_has_is_served() -> None:
    assert served(ApiKey.DESCRIBE_GROUPS) == range(0, 7)


@pytest.mark.parametrize("version", served(ApiKey.DESCRIBE_GROUPS))
async def test_describe_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        member = await joined_member(state, 5, instance="host-a")
        answer = await round_trip(state, ApiKey.DESCRIBE_GROUPS, version, {
            "groups": ["g", "nope"], "include_authorized_operations": True})
        g, nope = answer.groups
        assert (g.group_id, g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
            "g", ErrorCode.none, "Stable", "consumer", "range")
        (m,) = g.members
        assert (m.member_id, m.client_id, m.client_host) == (
            member.member_id, "golden", "/127.0.0.1")
        assert (m.member_metadata, m.member_assignment) == (SUBSCRIPTION, b"mine")
        if version >= 3:
            assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
        if version >= 4:
            assert m.group_instance_id == "host-a"
        if version >= 6:
            assert g.error_message is None
            assert (nope.error_code, nope.error_message, nope.group_state) == (
                ErrorCode.group_id_not_found, "Group nope not found.", "Dead")
            assert nope.authorized_operations == NOT_REQUESTED
        else:  # older versions: an unknown group is Dead, no error
            assert (nope.error_code, nope.group_state, nope.members) == (
                ErrorCode.none, "Dead", ())


@pytest.mark.parametrize("version", [5, 6])
async def test_group_wide_errors_carry_a_message_in_v6(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await state.group_coordinator.shutdown()  # now COORDINATOR_NOT_AVAILABLE
        answer = await round_trip(state, ApiKey.DESCRIBE_GROUPS, version, {
            "groups": ["g"], "include_authorized_operations": False})
        (g,) = answer.groups
        assert g.error_code == ErrorCode.coordinator_not_available
        if version >= 6:
            assert g.error_message
