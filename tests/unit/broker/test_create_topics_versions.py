"""CreateTopics v2-7 through the wire path: v5's configs and counts, v7's topic id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers import served_versions
from strata.broker.handlers.describe_configs import ConfigSource
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import is_flexible
from strata.security.acl import AclOperation, ResourceType

from .helpers import broker_state
from .wire_round_trip import round_trip

VERSIONS = served_versions()[ApiKey.CREATE_TOPICS].versions()


def create(name: str, partitions: int = 2, *, validate_only: bool = False,
           **configs: str) -> dict[str, Any]:
    return {"timeout_ms": 1000, "validate_only": validate_only, "topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}]}


def test_the_newest_version_kio_knows_is_served() -> None:
    assert range(2, 8) == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_creates_and_answers_the_topic(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    response = await round_trip(state, ApiKey.CREATE_TOPICS, version,
                                create("t", retention_ms="60000"),
                                unknown_tag=is_flexible(ApiKey.CREATE_TOPICS, version))
    (result,) = response.topics
    assert (result.name, result.error_code) == ("t", 0)
    record = state.topic_store.get("t")
    assert record is not None and record.partitions == 2
    if version < 5:
        return
    assert (result.num_partitions, result.replication_factor) == (2, 1)
    assert result.topic_config_error_code == 0
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert not any(c.read_only or c.is_sensitive for c in result.configs)
    if version >= 7:
        assert result.topic_id == record.topic_id


@pytest.mark.parametrize("version", [5, 7])
async def test_validate_only_answers_what_would_be_created(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    response = await round_trip(state, ApiKey.CREATE_TOPICS, version,
                                create("t", 3, validate_only=True, cleanup_policy="compact"))
    (result,) = response.topics
    assert (result.error_code, result.num_partitions) == (0, 3)
    assert {c.name: c.value for c in result.configs}["cleanup.policy"] == "compact"
    assert state.topic_store.get("t") is None
    if version >= 7:
        assert result.topic_id is None or result.topic_id.int == 0


@pytest.mark.parametrize("version", [5, 7])
async def test_a_failed_topic_has_no_counts_nor_configs(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    await round_trip(state, ApiKey.CREATE_TOPICS, version, create("t"))
    response = await round_trip(state, ApiKey.CREATE_TOPICS, version, create("t"))
    (result,) = response.topics
    assert result.error_code == 36  # TOPIC_ALREADY_EXISTS
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, ())


class _NoDescribeConfigs:
    """An authorizer allowing everything but DescribeConfigs."""

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        return operation is not AclOperation.DESCRIBE_CONFIGS


async def test_without_describe_configs_the_tagged_config_error_is_set(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    state.authorizer = _NoDescribeConfigs()  # type: ignore[assignment]
    response = await round_trip(state, ApiKey.CREATE_TOPICS, 7, create("t"), unknown_tag=True)
    (result,) = response.topics
    assert result.error_code == 0
    assert result.topic_config_error_code == 29  # TOPIC_AUTHORIZATION_FAILED
    assert result.configs == ()
    assert result.num_partitions == 2
