"""Broker and broker-logger config resources as Kafka answers them, through the wire path.

Per-broker dynamic configs (Kafka's ``DynamicBrokerConfig``) are accepted on a broker id and
persisted in the metadata store; the cluster default refuses the per-broker ones; BROKER
describes every layer with its source; BROKER_LOGGER lists and sets the broker's loggers; the
deprecated topic config ``message.format.version`` is accepted and ignored with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers.describe_configs import ConfigResourceType, ConfigSource
from strata.broker.server import BrokerState
from strata.broker.topic_store import FileTopicStore
from strata.protocol.api_keys import ApiKey

from .helpers import add_topics, broker_state
from .wire_round_trip import round_trip

BROKER = ConfigResourceType.BROKER
LOGGER = ConfigResourceType.BROKER_LOGGER
TOPIC = ConfigResourceType.TOPIC
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG, INVALID_REQUEST = 40, 42


async def incremental(state: BrokerState, resource_type: int, name: str,
                      *changes: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    response = await round_trip(state, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "validate_only": validate_only, "resources": [{
            "resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "config_operation": op, "value": v}
                        for k, op, v in changes]}]}, unknown_tag=True)
    (result,) = response.responses
    return result


async def alter(state: BrokerState, resource_type: int, name: str, configs: dict[str, str],
                version: int = 2) -> Any:
    response = await round_trip(state, ApiKey.ALTER_CONFIGS, version, {
        "validate_only": False, "resources": [{
            "resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    (result,) = response.responses
    return result


async def describe(state: BrokerState, resource_type: int, name: str) -> Any:
    response = await round_trip(state, ApiKey.DESCRIBE_CONFIGS, 4, {
        "include_synonyms": True, "include_documentation": False, "resources": [{
            "resource_type": resource_type, "resource_name": name,
            "configuration_keys": None}]}, unknown_tag=True)
    (result,) = response.results
    return result


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


# ------------------------------------------------------------------ dynamic broker configs


@pytest.mark.parametrize("change", [
    ("sasl.kerberos.min.time.before.relogin", "60000"),
    ("listener.name.sasl_ssl.ssl.keystore.location", "/etc/strata/broker.pem"),
    ("listener.name.sasl_ssl.plain.sasl.jaas.config", "org.apache.kafka.common.security."
     "plain.PlainLoginModule required;"),
    ("advertised.listeners", "PLAINTEXT://broker-1.example:9092"),
    ("ssl.client.auth", "required"),
])
async def test_per_broker_configs_are_accepted_and_persisted(tmp_path: Path,
                                                             change: tuple[str, str]) -> None:
    state = broker_state(tmp_path)
    key, value = change
    result = await incremental(state, BROKER, "1", (key, SET, value))
    assert (result.error_code, result.error_message) == (0, None)
    assert state.topic_store.broker_configs("1") == {key: value}
    reopened = FileTopicStore.open(tmp_path / "data")
    assert reopened.broker_configs("1") == {key: value}
    config = by_name(await describe(state, BROKER, "1"))[key]
    assert config.config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.read_only is False
    assert config.value == (None if config.is_sensitive else value)


@pytest.mark.parametrize("key", ["sasl.kerberos.min.time.before.relogin",
                                 "listener.name.sasl_ssl.ssl.keystore.location",
                                 "ssl.client.auth"])
async def test_per_broker_configs_are_refused_on_the_cluster_default(tmp_path: Path,
                                                                    key: str) -> None:
    state = broker_state(tmp_path)
    result = await incremental(state, BROKER, "", (key, SET, "1"))
    assert result.error_code == INVALID_CONFIG
    assert "broker id must be specified" in result.error_message
    assert state.topic_store.broker_configs("") == {}


async def test_a_keystore_setting_needs_a_listener_prefix(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    result = await alter(state, BROKER, "1", {"ssl.keystore.location": "/x.pem"})
    assert result.error_code == INVALID_CONFIG
    assert "only per-listener using the listener prefix" in result.error_message


@pytest.mark.parametrize("scope", ["", "1"])
async def test_cleaner_thread_and_connection_settings_at_either_level(tmp_path: Path,
                                                                      scope: str) -> None:
    state = broker_state(tmp_path)
    configs = {"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "30000",
               "num.io.threads": "16", "background.threads": "4",
               "num.recovery.threads.per.data.dir": "3", "max.connections.per.ip": "100",
               "listener.name.plaintext.max.connections": "1000"}
    result = await alter(state, BROKER, scope, configs, version=1)
    assert (result.error_code, result.error_message) == (0, None)
    assert state.topic_store.broker_configs(scope) == configs
    assert state.broker_defaults()["log.cleaner.threads"] == "2"  # what the next start reads


@pytest.mark.parametrize(("configs", "message"), [
    ({"log.dirs": "/elsewhere"}, "Cannot update these configs dynamically: log.dirs"),
    ({"node.id": "7"}, "Cannot update these configs dynamically: node.id"),
    ({"log.cleaner.threads": "many"}, "log.cleaner.threads"),
    ({"sasl.login.refresh.buffer.seconds": "99999"}, "sasl.login.refresh.buffer.seconds"),
])
async def test_static_keys_and_bad_values_are_invalid_config(tmp_path: Path,
                                                             configs: dict[str, str],
                                                             message: str) -> None:
    state = broker_state(tmp_path)
    result = await alter(state, BROKER, "1", configs)
    assert result.error_code == INVALID_CONFIG
    assert message in result.error_message
    assert state.topic_store.broker_configs("1") == {}


async def test_every_source_of_a_broker_setting(tmp_path: Path) -> None:
    state = broker_state(tmp_path, num_recovery_threads_per_data_dir="3")
    before = by_name(await describe(state, BROKER, "1"))["num.recovery.threads.per.data.dir"]
    assert (before.value, before.config_source) == ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert (await alter(state, BROKER, "", {"num.recovery.threads.per.data.dir": "4"})
            ).error_code == 0
    assert (await alter(state, BROKER, "1", {"num.recovery.threads.per.data.dir": "5"})
            ).error_code == 0
    config = by_name(await describe(state, BROKER, "1"))["num.recovery.threads.per.data.dir"]
    assert (config.value, config.config_source, config.read_only) == (
        "5", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert [(s.value, s.source) for s in config.synonyms] == [
        ("5", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("3", ConfigSource.STATIC_BROKER_CONFIG),
        ("2", ConfigSource.DEFAULT_CONFIG)]
    defaults = by_name(await describe(state, BROKER, ""))
    assert defaults["num.recovery.threads.per.data.dir"].config_source == (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    static_only = by_name(await describe(state, BROKER, "1"))["num.partitions"]
    assert (static_only.config_source, static_only.read_only) == (
        ConfigSource.DEFAULT_CONFIG, True)


# ------------------------------------------------------------------ broker loggers


@pytest.fixture
def test_logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("strata.tests.broker_logger")
    log.setLevel(logging.INFO)
    yield log
    log.setLevel(logging.NOTSET)


async def test_broker_logger_lists_loggers_and_levels(tmp_path: Path,
                                                      test_logger: logging.Logger) -> None:
    state = broker_state(tmp_path)
    result = await describe(state, LOGGER, "1")
    assert result.error_code == 0
    loggers = by_name(result)
    assert "root" in loggers
    entry = loggers["strata.tests.broker_logger"]
    assert (entry.value, entry.config_source, entry.read_only) == (
        "INFO", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False)


async def test_incremental_alter_sets_and_resets_a_logger_level(
        tmp_path: Path, test_logger: logging.Logger) -> None:
    state = broker_state(tmp_path)
    name = test_logger.name
    checked = await incremental(state, LOGGER, "1", (name, SET, "DEBUG"), validate_only=True)
    assert checked.error_code == 0 and test_logger.level == logging.INFO
    assert (await incremental(state, LOGGER, "1", (name, SET, "WARN"))).error_code == 0
    assert test_logger.level == logging.WARNING
    assert by_name(await describe(state, LOGGER, "1"))[name].value == "WARN"
    assert (await incremental(state, LOGGER, "1", (name, DELETE, None))).error_code == 0
    assert test_logger.level == logging.NOTSET


@pytest.mark.parametrize(("change", "error"), [
    (("strata.tests.no_such_logger", SET, "DEBUG"), INVALID_CONFIG),
    (("strata.tests.broker_logger", SET, "LOUD"), INVALID_CONFIG),
    (("root", DELETE, None), INVALID_CONFIG),
    (("strata.tests.broker_logger", APPEND, "DEBUG"), INVALID_REQUEST),
])
async def test_refused_logger_changes(tmp_path: Path, test_logger: logging.Logger,
                                      change: tuple[str, int, str | None], error: int) -> None:
    state = broker_state(tmp_path)
    result = await incremental(state, LOGGER, "1", change)
    assert result.error_code == error
    assert test_logger.level == logging.INFO


async def test_alter_configs_does_not_serve_broker_loggers(tmp_path: Path) -> None:
    result = await alter(broker_state(tmp_path), LOGGER, "1", {"root": "DEBUG"})
    assert result.error_code == INVALID_REQUEST


# ------------------------------------------------------------------ message.format.version


async def test_message_format_version_is_accepted_and_ignored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = broker_state(tmp_path)
    created = await round_trip(state, ApiKey.CREATE_TOPICS, 7, {
        "timeout_ms": 1000, "validate_only": False, "topics": [{
            "name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": [{"name": "message.format.version", "value": "2.8-IV1"},
                        {"name": "retention.ms", "value": "60000"}]}]})
    assert created.topics[0].error_code == 0
    record = state.topic_store.get("t")
    assert record is not None and dict(record.configs) == {"retention.ms": "60000"}
    assert "message.format.version is deprecated and will be ignored" in caplog.text
    assert (await alter(state, TOPIC, "t", {"message.format.version": "3.0"})).error_code == 0
    assert (await incremental(state, TOPIC, "t", ("message.format.version", SET, "3.0"))
            ).error_code == 0


async def test_unknown_topic_configs_are_still_refused(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await add_topics(state, ("t", 1))
    result = await alter(state, TOPIC, "t", {"message.format.verzion": "3.0"})
    assert result.error_code == INVALID_CONFIG


async def test_append_to_a_list_broker_setting_starts_from_its_default(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    result = await incremental(state, BROKER, "1", ("sasl.enabled.mechanisms", APPEND, "PLAIN"))
    assert (result.error_code, result.error_message) == (0, None)
    assert state.topic_store.broker_configs("1") == {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"}
