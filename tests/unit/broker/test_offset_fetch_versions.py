"""OffsetFetch v1-v9 on the wire: one group (v1-v7) or a batch of groups (v8+, KIP-709),
v9's member id and epoch ignored for classic groups (as Kafka does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from .group_wire import fresh_state, round_trip, served


def test_served_up_to_v9() -> None:
    # v10 names topics by id (KIP-848's consumer protocol); it is not served yet.
    assert served(ApiKey.OFFSET_FETCH) == range(1, 10)


async def commit(state: BrokerState, group_id: str, *partitions: tuple[int, int]) -> None:
    answer = await round_trip(state, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": i, "committed_offset": o, "committed_leader_epoch": 2,
             "committed_metadata": f"m{o}"} for i, o in partitions]}]})
    assert all(p.error_code == ErrorCode.none for t in answer.topics for p in t.partitions)


def offsets(topics: Any) -> list[tuple[str, int, int, int, str | None, ErrorCode]]:
    # v1-v4 have no leader epoch: -1, as Kafka's default
    return [(t.name, p.partition_index, p.committed_offset,
             getattr(p, "committed_leader_epoch", -1), p.metadata, p.error_code)
            for t in topics for p in t.partitions]


@pytest.mark.parametrize("version", range(1, 8))
async def test_one_group_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await commit(state, "g", (0, 10))
        answer = await round_trip(state, ApiKey.OFFSET_FETCH, version, {
            "group_id": "g", "require_stable": True,
            "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
        epoch = 2 if version >= 5 else -1
        assert offsets(answer.topics) == [
            ("t", 0, 10, epoch, "m10", ErrorCode.none),
            ("t", 1, -1, -1, "", ErrorCode.none)]
        if version >= 2:
            assert answer.error_code == ErrorCode.none
            everything = await round_trip(state, ApiKey.OFFSET_FETCH, version,
                                          {"group_id": "g", "topics": None})
            assert offsets(everything.topics) == [("t", 0, 10, epoch, "m10", ErrorCode.none)]


@pytest.mark.parametrize("version", [8, 9])
async def test_a_batch_of_groups(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await commit(state, "a", (0, 10), (1, 11))
        await commit(state, "b", (1, 21))
        answer = await round_trip(state, ApiKey.OFFSET_FETCH, version, {
            "require_stable": False, "groups": [
                {"group_id": "a", "member_id": None, "member_epoch": -1, "topics": None},
                {"group_id": "b", "member_id": "m-1", "member_epoch": 7,  # ignored: classic
                 "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
                {"group_id": "nobody", "member_id": None, "member_epoch": -1,
                 "topics": [{"name": "t", "partition_indexes": [0]}]}]})
        assert [(g.group_id, g.error_code) for g in answer.groups] == [
            ("a", ErrorCode.none), ("b", ErrorCode.none), ("nobody", ErrorCode.none)]
        a, b, nobody = answer.groups
        assert offsets(a.topics) == [("t", 0, 10, 2, "m10", ErrorCode.none),
                                     ("t", 1, 11, 2, "m11", ErrorCode.none)]
        assert offsets(b.topics) == [("t", 0, -1, -1, "", ErrorCode.none),
                                     ("t", 1, 21, 2, "m21", ErrorCode.none)]
        assert offsets(nobody.topics) == [("t", 0, -1, -1, "", ErrorCode.none)]


@pytest.mark.parametrize("version", [7, 8, 9])
async def test_group_wide_errors(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        await state.group_coordinator.shutdown()  # now COORDINATOR_NOT_AVAILABLE
        fields: dict[str, Any] = {
            "group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}],
            "groups": [{"group_id": g, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": "t", "partition_indexes": [0]}]}
                       for g in ("g", "h")]}
        answer = await round_trip(state, ApiKey.OFFSET_FETCH, version, fields)
        if version < 8:
            assert (answer.error_code, answer.topics) == (
                ErrorCode.coordinator_not_available, ())
        else:  # each group its own error, no topics
            assert [(g.group_id, g.error_code, g.topics) for g in answer.groups] == [
                ("g", ErrorCode.coordinator_not_available, ()),
                ("h", ErrorCode.coordinator_not_available, ())]
