"""JoinGroup v0-v9 on the wire, and the SyncGroup / Heartbeat / LeaveGroup of the members.

Per version: v4+ hands a new dynamic member its id first (MEMBER_ID_REQUIRED, KIP-394); v5+
carries the static instance id; v7+ answers ``protocol_type`` and a null ``protocol_name`` on
errors; v8+ carries a ``reason``; v9 tells a static leader that rejoins a Stable group to skip
the assignment (KIP-814).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import (
    SUBSCRIPTION,
    UNKNOWN_TAGGED_FIELD,
    fresh_state,
    join_fields,
    joined_member,
    round_trip,
    served,
)


def test_every_version_kio_has_is_served() -> None:
    assert served(ApiKey.JOIN_GROUP) == range(0, 10)


@pytest.mark.parametrize("version", served(ApiKey.JOIN_GROUP))
async def test_a_member_joins_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        first = await round_trip(state, ApiKey.JOIN_GROUP, version,
                                 join_fields(version, reason="starting"))
        if version >= 4:
            assert first.error_code == ErrorCode.member_id_required and first.member_id
            first = await round_trip(state, ApiKey.JOIN_GROUP, version,
                                     join_fields(version, first.member_id, reason="again"))
        assert first.error_code == ErrorCode.none and first.generation_id == 1
        assert first.leader == first.member_id and first.protocol_name == "range"
        assert [(m.member_id, m.metadata) for m in first.members] == [
            (first.member_id, SUBSCRIPTION)]
        if version >= 7:
            assert first.protocol_type == "consumer"
        if version >= 9:
            assert first.skip_assignment is False


@pytest.mark.parametrize("version", served(ApiKey.JOIN_GROUP))
async def test_errors_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        unknown = await round_trip(state, ApiKey.JOIN_GROUP, version,
                                   join_fields(version, member_id="ghost"))
        assert unknown.error_code == ErrorCode.unknown_member_id
        assert unknown.generation_id == -1 and unknown.members == ()
        # Kafka's rule: v7+ says "no protocol" with null, older versions with "".
        assert unknown.protocol_name == (None if version >= 7 else "")


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
async def test_a_static_leader_rejoining_a_stable_group(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        old = await joined_member(state, version, instance="host-a")
        again = await round_trip(state, ApiKey.JOIN_GROUP, version,
                                 join_fields(version, instance="host-a"))
        assert again.error_code == ErrorCode.none and again.generation_id == old.generation_id
        assert again.member_id != old.member_id
        if version >= 9:  # KIP-814: it leads again, sees the members, must not assign
            assert again.skip_assignment is True and again.leader == again.member_id
            assert [(m.member_id, m.group_instance_id) for m in again.members] == [
                (again.member_id, "host-a")]
        else:  # older clients would assign: they are given the old leader id and no members
            assert again.leader == old.member_id and again.members == ()
        # The group kept its assignment: the new id gets it without a rebalance.
        synced = await round_trip(state, ApiKey.SYNC_GROUP, 3, {
            "group_id": "g", "generation_id": again.generation_id,
            "member_id": again.member_id, "group_instance_id": "host-a", "assignments": []})
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")


@pytest.mark.parametrize("version", served(ApiKey.SYNC_GROUP))
async def test_sync_group_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        joined = await round_trip(state, ApiKey.JOIN_GROUP, 3, join_fields(3))
        member = joined.member_id
        synced = await round_trip(state, ApiKey.SYNC_GROUP, version, {
            "group_id": "g", "generation_id": 1, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"mine"}]})
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
        if version >= 5:  # KIP-559: the group's protocol is answered
            assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")


@pytest.mark.parametrize(("protocol_type", "protocol_name", "error"), [
    ("consumer", "range", ErrorCode.none),
    (None, None, ErrorCode.none),
    ("connect", "range", ErrorCode.inconsistent_group_protocol),
    ("consumer", "roundrobin", ErrorCode.inconsistent_group_protocol),
])
async def test_sync_group_v5_checks_the_protocol(tmp_path: Path, protocol_type: str | None,
                                                 protocol_name: str | None,
                                                 error: ErrorCode) -> None:
    async with fresh_state(tmp_path) as state:
        joined = await round_trip(state, ApiKey.JOIN_GROUP, 3, join_fields(3))
        synced = await round_trip(state, ApiKey.SYNC_GROUP, 5, {
            "group_id": "g", "generation_id": 1, "member_id": joined.member_id,
            "group_instance_id": None, "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignments": [{"member_id": joined.member_id, "assignment": b"mine"}]})
        assert synced.error_code == error
        if error != ErrorCode.none:
            assert synced.assignment == b"" and synced.protocol_name is None


@pytest.mark.parametrize("version", served(ApiKey.HEARTBEAT))
async def test_heartbeat_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        member = await joined_member(state, 5, instance="host-a")
        fields = {"group_id": "g", "generation_id": member.generation_id,
                  "member_id": member.member_id, "group_instance_id": "host-a"}
        beat = await round_trip(state, ApiKey.HEARTBEAT, version, fields)
        assert beat.error_code == ErrorCode.none
        stale = await round_trip(state, ApiKey.HEARTBEAT, version,
                                 {**fields, "generation_id": member.generation_id + 1})
        assert stale.error_code == ErrorCode.illegal_generation


@pytest.mark.parametrize("version", served(ApiKey.LEAVE_GROUP))
async def test_leave_group_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        member = await joined_member(state, 5, instance="host-a")
        left = await round_trip(state, ApiKey.LEAVE_GROUP, version, {
            "group_id": "g", "member_id": member.member_id,
            "members": [{"member_id": member.member_id, "group_instance_id": "host-a",
                         "reason": "shutting down"},
                        {"member_id": "ghost", "group_instance_id": None, "reason": None}]})
        assert left.error_code == ErrorCode.none
        if version >= 3:  # a batch: each member its own error
            assert [(m.member_id, m.error_code) for m in left.members] == [
                (member.member_id, ErrorCode.none), ("ghost", ErrorCode.unknown_member_id)]
        beat = await round_trip(state, ApiKey.HEARTBEAT, 3, {
            "group_id": "g", "generation_id": member.generation_id,
            "member_id": member.member_id, "group_instance_id": None})
        assert beat.error_code == ErrorCode.unknown_member_id


def tag_in_the_last_protocol(version: int) -> Callable[[bytes], bytes]:
    """A splice for a JoinGroup v6+ frame, which ends ``protocol tags, [reason (null), v8+]
    top-level tags``: the unknown tagged field goes in the last protocol's (a nested struct's)
    tag buffer."""
    tail = 3 if version >= 8 else 2

    def splice(frame: bytes) -> bytes:
        assert frame[-tail:] == b"\x00" * tail
        return frame[:-tail] + UNKNOWN_TAGGED_FIELD + frame[-tail + 1:]

    return splice


@pytest.mark.parametrize("version", [6, 7, 8, 9])
async def test_an_unknown_tag_in_a_nested_struct_is_skipped(tmp_path: Path,
                                                            version: int) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.JOIN_GROUP, version, join_fields(version),
                                  splice=tag_in_the_last_protocol(version))
        assert answer.error_code == ErrorCode.member_id_required and answer.member_id
