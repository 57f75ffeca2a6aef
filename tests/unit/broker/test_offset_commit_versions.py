"""OffsetCommit v2-v9 on the wire (v8 flexible; v9's ``generation_id_or_member_epoch`` is a
classic group's generation, checked as before; a member's commit to no group is
GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers import build_registry
from strata.protocol import ApiKey, RequestHeader, build_request, decode_request
from strata.protocol.codec import encode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import UnsupportedVersion

from .group_wire import fresh_state, joined_member, round_trip, served


def test_served_up_to_v9() -> None:
    # v10 names topics by id (KIP-848's consumer protocol); it is not served yet.
    assert served(ApiKey.OFFSET_COMMIT) == range(2, 10)


def commit(generation: int = -1, member_id: str = "", instance: str | None = None,
           *partitions: tuple[str, int, int]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, offset in partitions:
        topics.setdefault(topic, []).append({
            "partition_index": index, "committed_offset": offset,
            "committed_leader_epoch": 3, "committed_metadata": "meta",
            "commit_timestamp": -1})
    return {"group_id": "g", "generation_id_or_member_epoch": generation,
            "member_id": member_id, "group_instance_id": instance, "retention_time_ms": -1,
            "topics": [{"name": n, "partitions": p} for n, p in topics.items()]}


def errors(answer: Any) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition_index): p.error_code
            for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("version", served(ApiKey.OFFSET_COMMIT))
async def test_simple_commit_at_every_version(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.OFFSET_COMMIT, version,
                                  commit(-1, "", None, ("t", 0, 11), ("t", 7, 1)))
        assert errors(answer) == {("t", 0): ErrorCode.none,
                                  ("t", 7): ErrorCode.unknown_topic_or_partition}
        fetched = await round_trip(state, ApiKey.OFFSET_FETCH, 9, {
            "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                        "topics": [{"name": "t", "partition_indexes": [0]}]}]})
        (partition,) = fetched.groups[0].topics[0].partitions
        assert (partition.committed_offset, partition.metadata) == (11, "meta")
        assert partition.committed_leader_epoch == (3 if version >= 6 else -1)


@pytest.mark.parametrize("version", [7, 8, 9])
async def test_member_commit_checks_the_generation(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        member = await joined_member(state, 5, instance="host-a")
        good = await round_trip(state, ApiKey.OFFSET_COMMIT, version, commit(
            member.generation_id, member.member_id, "host-a", ("t", 0, 5)))
        assert errors(good) == {("t", 0): ErrorCode.none}
        # v9's field is still the generation for a classic group: a member epoch-like value
        # that is not the generation is ILLEGAL_GENERATION, as in Kafka.
        stale = await round_trip(state, ApiKey.OFFSET_COMMIT, version, commit(
            member.generation_id + 5, member.member_id, "host-a", ("t", 0, 6)))
        assert errors(stale) == {("t", 0): ErrorCode.illegal_generation}
        fenced = await round_trip(state, ApiKey.OFFSET_COMMIT, version, commit(
            member.generation_id, "other-id", "host-a", ("t", 0, 6)))
        assert errors(fenced) == {("t", 0): ErrorCode.fenced_instance_id}


@pytest.mark.parametrize("version", served(ApiKey.OFFSET_COMMIT))
async def test_a_member_commit_to_no_group(tmp_path: Path, version: int) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.OFFSET_COMMIT, version,
                                  commit(3, "gone-member", None, ("t", 0, 5)))
        assert errors(answer) == {("t", 0): ErrorCode.group_id_not_found if version >= 9
                                  else ErrorCode.illegal_generation}
        assert state.group_coordinator.group("g") is None  # no group was created


@pytest.mark.parametrize("api_key", [ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH])
def test_v10_is_refused_as_an_unsupported_version(api_key: ApiKey) -> None:
    fields = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
              "group_instance_id": None, "topics": [], "groups": [], "require_stable": False}
    frame = encode_request(RequestHeader(api_key, 10, 1, "c"),
                           build_request(api_key, 10, fields))[4:]
    with pytest.raises(UnsupportedVersion):
        decode_request(frame, build_registry().version_ranges())
