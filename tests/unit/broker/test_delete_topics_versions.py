"""DeleteTopics v1-6 through the wire path: by name in every version, by topic id from v6."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strata.broker.handlers import served_versions
from strata.broker.server import BrokerState
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import is_flexible

from .helpers import add_topics, broker_state
from .wire_round_trip import round_trip

VERSIONS = served_versions()[ApiKey.DELETE_TOPICS].versions()


async def state_with_topic(tmp_path: Path) -> BrokerState:
    state = broker_state(tmp_path)
    await add_topics(state, ("t", 2))
    return state


def test_the_newest_version_kio_knows_is_served() -> None:
    assert range(1, 7) == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_deletes_by_name(tmp_path: Path, version: int) -> None:
    state = await state_with_topic(tmp_path)
    record = state.topic_store.get("t")
    assert record is not None
    response = await round_trip(
        state, ApiKey.DELETE_TOPICS, version,
        {"timeout_ms": 1000, "topic_names": ["t", "missing"],
         "topics": [{"name": "t", "topic_id": None}, {"name": "missing", "topic_id": None}]},
        unknown_tag=is_flexible(ApiKey.DELETE_TOPICS, version))
    assert [(r.name, r.error_code) for r in response.responses] == [("t", 0), ("missing", 3)]
    assert state.topic_store.get("t") is None
    if version >= 6:
        assert response.responses[0].topic_id == record.topic_id


async def test_v6_deletes_by_topic_id_and_names_it(tmp_path: Path) -> None:
    state = await state_with_topic(tmp_path)
    record = state.topic_store.get("t")
    assert record is not None
    response = await round_trip(state, ApiKey.DELETE_TOPICS, 6, {
        "timeout_ms": 1000, "topics": [{"name": None, "topic_id": record.topic_id}]},
        unknown_tag=True)
    (result,) = response.responses
    assert (result.name, result.topic_id, result.error_code) == ("t", record.topic_id, 0)
    assert state.topic_store.get("t") is None
    assert not (tmp_path / "data" / "t-0").exists()


async def test_v6_unknown_topic_id(tmp_path: Path) -> None:
    state = await state_with_topic(tmp_path)
    unknown = uuid.UUID("00000000-0000-4000-8000-00000000abcd")
    response = await round_trip(state, ApiKey.DELETE_TOPICS, 6, {
        "timeout_ms": 1000, "topics": [{"name": None, "topic_id": unknown}]})
    (result,) = response.responses
    assert (result.name, result.topic_id, result.error_code) == (None, unknown, 100)
    assert state.topic_store.get("t") is not None


async def test_v6_name_and_id_together_is_invalid_request(tmp_path: Path) -> None:
    state = await state_with_topic(tmp_path)
    record = state.topic_store.get("t")
    assert record is not None
    response = await round_trip(state, ApiKey.DELETE_TOPICS, 6, {
        "timeout_ms": 1000, "topics": [{"name": "t", "topic_id": record.topic_id}]})
    (result,) = response.responses
    assert result.error_code == 42
    assert result.error_message
    assert state.topic_store.get("t") is not None
