"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on a socket-less broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_settings import ConfigType
from strata.broker.broker_state import BrokerState
from strata.broker.handlers import alter_configs, describe_configs, incremental_alter_configs
from strata.broker.handlers.describe_configs import (
    ConfigResourceType,
    ConfigSource,
    topic_config_type,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.log_config import CONFIGS_BY_NAME, TOPIC_CONFIGS

from .helpers import broker_state, context, request
from .test_topic_handlers import create, topic

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


async def describe(state: BrokerState, resource_type: int, name: str, *,
                   keys: list[str] | None = None, synonyms: bool = False,
                   version: int = 3) -> Any:
    body = request(ApiKey.DESCRIBE_CONFIGS, version, resources=[{
        "resource_type": resource_type, "resource_name": name, "configuration_keys": keys,
    }], include_synonyms=synonyms, include_documentation=True)
    response = await describe_configs.handle(
        context(state, ApiKey.DESCRIBE_CONFIGS, version), body)
    (result,) = response.results
    return result


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


async def alter(state: BrokerState, resource_type: int, name: str, configs: dict[str, str | None],
                *, validate_only: bool = False, version: int = 1) -> tuple[int, str | None]:
    body = request(ApiKey.ALTER_CONFIGS, version, resources=[{
        "resource_type": resource_type, "resource_name": name,
        "configs": [{"name": k, "value": v} for k, v in configs.items()],
    }], validate_only=validate_only)
    response = await alter_configs.handle(context(state, ApiKey.ALTER_CONFIGS, version), body)
    (result,) = response.responses
    return result.error_code, result.error_message


async def incremental(state: BrokerState, resource_type: int, name: str,
                      ops: list[tuple[str, int, str | None]], version: int = 1) -> int:
    body = request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, resources=[{
        "resource_type": resource_type, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
    }], validate_only=False)
    response = await incremental_alter_configs.handle(
        context(state, ApiKey.INCREMENTAL_ALTER_CONFIGS, version), body)
    (result,) = response.responses
    return int(result.error_code)


# ---------------------------------------------------------------------------- Describe


async def test_topic_lists_every_config_with_its_source(tmp_path: Path) -> None:
    state = broker_state(tmp_path, log_segment_bytes="1048576")
    await create(state, topic("t", 1, 1, configs={"retention.ms": "1000"}))
    result = await describe(state, TOPIC, "t")
    assert result.error_code == ErrorCode.none
    configs = by_name(result)
    assert set(configs) == {c.name for c in TOPIC_CONFIGS}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
        "1048576", ConfigSource.STATIC_BROKER_CONFIG)
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == (
        "delete", ConfigSource.DEFAULT_CONFIG)
    assert configs["retention.ms"].config_type == ConfigType.LONG
    assert configs["segment.bytes"].config_type == ConfigType.INT
    assert configs["cleanup.policy"].config_type == ConfigType.LIST
    assert configs["leader.replication.throttled.replicas"].config_type == ConfigType.LIST
    assert configs["follower.replication.throttled.replicas"].config_type == ConfigType.LIST
    assert configs["preallocate"].config_type == ConfigType.BOOLEAN
    assert configs["retention.ms"].documentation
    assert configs["retention.ms"].synonyms == ()  # not asked for
    assert not any(c.read_only for c in result.configs)


async def test_topic_synonyms_in_precedence_order(tmp_path: Path) -> None:
    state = broker_state(tmp_path, log_retention_hours="2")
    await create(state, topic("t", 1, 1, configs={"retention.ms": "1000"}))
    await alter(state, BROKER, "", {"log.retention.ms": "7000"})
    config = by_name(await describe(state, TOPIC, "t", synonyms=True))["retention.ms"]
    assert [(s.name, s.value, s.source) for s in config.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]


async def test_configuration_keys_filter_and_errors(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1))
    assert list(by_name(await describe(state, TOPIC, "t", keys=["retention.ms"]))) == [
        "retention.ms"]
    assert (await describe(state, TOPIC, "t", keys=[])).configs == ()
    missing = await describe(state, TOPIC, "missing", version=1)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition and missing.configs == ()
    assert (await describe(state, TOPIC, "bad/name")).error_code == (
        ErrorCode.invalid_topic_exception)
    assert (await describe(state, BROKER, "5")).error_code == ErrorCode.invalid_request
    assert (await describe(state, BROKER, "x")).error_code == ErrorCode.invalid_request
    # BROKER_LOGGER (8) is served for this broker only (test_broker_configs.py).
    assert (await describe(state, 8, "5")).error_code == ErrorCode.invalid_request
    assert (await describe(state, 8, "")).error_code == ErrorCode.invalid_request


async def test_broker_resource_is_this_node(tmp_path: Path) -> None:
    state = broker_state(tmp_path, num_partitions="4")
    configs = by_name(await describe(state, BROKER, "1"))
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source,
            configs["num.partitions"].read_only) == ("4", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert configs["queued.max.requests"].config_source == ConfigSource.DEFAULT_CONFIG
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].read_only) == (
        "604800000", False)


def test_config_types_follow_kafka() -> None:
    assert topic_config_type(CONFIGS_BY_NAME["max.message.bytes"]) is ConfigType.INT
    assert topic_config_type(CONFIGS_BY_NAME["flush.ms"]) is ConfigType.LONG
    assert topic_config_type(CONFIGS_BY_NAME["min.cleanable.dirty.ratio"]) is ConfigType.DOUBLE
    assert topic_config_type(CONFIGS_BY_NAME["compression.type"]) is ConfigType.STRING


# ---------------------------------------------------------------------------- AlterConfigs


async def test_alter_topic_configs_replaces_the_set_and_reaches_the_log(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1, configs={"retention.ms": "1000",
                                                  "segment.bytes": "4096"}))
    assert await alter(state, TOPIC, "t", {"retention.ms": "2000"}) == (ErrorCode.none, None)
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {"retention.ms": "2000"}
    partition = state.replica_manager.get_partition("t", 0)
    assert partition is not None
    assert partition.log.config.retention_ms == 2000
    assert partition.log.config.segment_bytes == 1073741824  # back to the default


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"retention.ms": "never"}, ErrorCode.invalid_config),
        ({"no.such": "1"}, ErrorCode.invalid_config),
        ({"retention.ms": None}, ErrorCode.invalid_request),
    ],
)
async def test_alter_topic_configs_errors(
    tmp_path: Path, configs: dict[str, str | None], error: ErrorCode
) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1, configs={"retention.ms": "1000"}))
    assert (await alter(state, TOPIC, "t", configs))[0] == error
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {"retention.ms": "1000"}


async def test_alter_validate_only_and_unknown_topic(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1))
    assert (await alter(state, TOPIC, "t", {"retention.ms": "5"}, validate_only=True))[0] == 0
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {}
    assert (await alter(state, TOPIC, "nope", {}, version=0))[0] == (
        ErrorCode.unknown_topic_or_partition)


async def test_dynamic_broker_configs_apply_to_topics_without_overrides(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("plain", 1, 1), topic("own", 1, 1, configs={"retention.ms": "9"}))
    assert await alter(state, BROKER, "1", {"log.retention.ms": "3000"}) == (ErrorCode.none, None)
    plain = state.replica_manager.get_partition("plain", 0)
    own = state.replica_manager.get_partition("own", 0)
    assert plain is not None and own is not None
    assert plain.log.config.retention_ms == 3000
    assert own.log.config.retention_ms == 9
    configs = by_name(await describe(state, TOPIC, "plain"))
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "3000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert dict(state.topic_store.broker_configs("1")) == {"log.retention.ms": "3000"}
    # Static settings cannot change at run time; bad values are refused.
    assert (await alter(state, BROKER, "1", {"num.partitions": "3"}))[0] == (
        ErrorCode.invalid_config)
    assert (await alter(state, BROKER, "1", {"log.retention.ms": "x"}))[0] == (
        ErrorCode.invalid_config)
    assert (await alter(state, BROKER, "2", {}))[0] == ErrorCode.invalid_request
    # Removing the dynamic value restores the default.
    assert (await alter(state, BROKER, "1", {}))[0] == ErrorCode.none
    assert plain.log.config.retention_ms == 604800000


# ---------------------------------------------------------------------------- Incremental


async def test_incremental_operations(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1, configs={"retention.ms": "1000"}))
    assert await incremental(state, TOPIC, "t", [("segment.bytes", 0, "8192"),
                                                 ("retention.ms", 1, None)]) == 0
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {"segment.bytes": "8192"}
    assert await incremental(state, TOPIC, "t", [("cleanup.policy", 2, "compact")]) == 0
    record = state.topic_store.get("t")
    assert record is not None and record.configs["cleanup.policy"] == "delete,compact"
    partition = state.replica_manager.get_partition("t", 0)
    assert partition is not None and partition.log.config.compact
    assert await incremental(state, TOPIC, "t", [("cleanup.policy", 3, "delete")]) == 0
    record = state.topic_store.get("t")
    assert record is not None and record.configs["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([("retention.ms", 2, "5")], ErrorCode.invalid_request),  # APPEND to a non-list
        ([("retention.ms", 0, "1"), ("retention.ms", 1, None)], ErrorCode.invalid_request),
        ([("retention.ms", 9, "1")], ErrorCode.invalid_request),
        ([("retention.ms", 0, None)], ErrorCode.invalid_request),
        ([("retention.ms", 0, "x")], ErrorCode.invalid_config),
        ([("cleanup.policy", 0, "shred")], ErrorCode.invalid_config),
    ],
)
async def test_incremental_errors(
    tmp_path: Path, ops: list[tuple[str, int, str | None]], error: ErrorCode
) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1))
    assert await incremental(state, TOPIC, "t", ops) == error
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {}


async def test_incremental_on_the_broker(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1))
    assert await incremental(state, BROKER, "", [("log.cleanup.policy", 2, "compact")],
                             version=0) == 0
    assert dict(state.topic_store.broker_configs("")) == {"log.cleanup.policy": "delete,compact"}
    partition = state.replica_manager.get_partition("t", 0)
    assert partition is not None and partition.log.config.compact
