"""BrokerConfig: precedence (flags > STRATA_* env > file > defaults), parsing, unknown keys."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strata.broker.config import (
    KNOWN_KEYS,
    BrokerConfig,
    ConfigError,
    Listener,
    Origin,
    env_settings,
    parse_overrides,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.load(env={})
    assert config.node_id == 0
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.socket_request_max_bytes == 104857600
    assert config.http_port == 9404
    assert config.listener == Listener("PLAINTEXT", "127.0.0.1", 9092)
    assert config.origin("num.partitions") is Origin.DEFAULT
    assert config.log_manager_props() == {}


def test_flag_beats_env_beats_file_beats_default(tmp_path: Path) -> None:
    path = write(tmp_path, "num.partitions=2\nlog.segment.bytes=1000\nnode.id=4\n"
                           "default.replication.factor=1\n")
    env = {"STRATA_NUM_PARTITIONS": "3", "STRATA_LOG_SEGMENT_BYTES": "2000"}
    config = BrokerConfig.load(path, env=env, overrides=["num.partitions=5"])
    assert config.num_partitions == 5
    assert config.origin("num.partitions") is Origin.FLAG
    assert config.get("log.segment.bytes") == "2000"
    assert config.origin("log.segment.bytes") is Origin.ENV
    assert config.node_id == 4
    assert config.origin("node.id") is Origin.FILE
    assert config.get("queued.max.requests") == "500"
    assert config.origin("queued.max.requests") is Origin.DEFAULT


def test_env_names_map_to_kafka_names() -> None:
    assert env_settings({"STRATA_LOG_SEGMENT_BYTES": "1", "PATH": "/bin", "STRATA_": "x"}) == {
        "log.segment.bytes": "1"
    }


def test_overrides_split_on_the_first_equals_sign() -> None:
    assert parse_overrides(["a.b=1", "c= x=y "]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])


def test_log_keys_reach_the_log_manager_as_given(tmp_path: Path) -> None:
    path = write(tmp_path, "log.retention.hours=1\nlog.segment.bytes=4096\n")
    props = BrokerConfig.load(path, env={}).log_manager_props()
    assert props["log.retention.hours"] == "1"
    assert props["log.segment.bytes"] == "4096"
    assert {"log.retention.hours", "log.segment.bytes", "log.roll.ms"} <= KNOWN_KEYS


def test_unknown_keys_are_logged_once_each_and_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "no.such.key=1\nmetadata.store=sqlite:///x.db\n")
    with caplog.at_level(logging.WARNING, logger="strata.broker.config"):
        config = BrokerConfig.load(path, env={"STRATA_OTHER_THING": "2"})
    assert config.unknown_keys() == ["no.such.key", "other.thing"]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("no.such.key" in m for m in messages) == 1
    assert sum("other.thing" in m for m in messages) == 1
    assert not any("metadata.store" in m for m in messages)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("node.id", "abc", "node.id='abc' .*not an integer"),
        ("node.id", "-1", "node.id must be >= 0"),
        ("auto.create.topics.enable", "yes", "not true or false"),
        ("listeners", "127.0.0.1:9092", "not NAME://host:port"),
        ("listeners", "PLAINTEXT://host:99999", "out of range"),
    ],
)
def test_bad_values_of_known_keys_are_fatal(key: str, value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        BrokerConfig.load(env={}, overrides={key: value})


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.load(tmp_path / "absent.properties", env={})


def test_listeners_and_advertised_listeners() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                           "advertised.listeners": "PLAINTEXT://kafka.example:19092"})
    assert config.listener.port == 0
    assert config.advertised_listener == Listener("PLAINTEXT", "kafka.example", 19092)
    plain = BrokerConfig({"listeners": "PLAINTEXT://10.0.0.5:9093"})
    assert plain.advertised_listener == Listener("PLAINTEXT", "10.0.0.5", 9093)
    wildcard = BrokerConfig({"listeners": "PLAINTEXT://:9092"})
    assert wildcard.listener.host == ""
    assert wildcard.advertised_listener.host not in ("", "0.0.0.0")
    ipv6 = Listener.parse("PLAINTEXT://[::1]:9092", "listeners")
    assert ipv6 == Listener("PLAINTEXT", "::1", 9092)


def test_log_dirs_fall_back_to_log_dir_and_broker_id_to_node_id(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dir": str(tmp_path / "a"), "broker.id": "7"})
    assert config.log_dirs == [tmp_path / "a"]
    assert config.node_id == 7
    both = BrokerConfig({"log.dirs": f"{tmp_path}/x, {tmp_path}/y", "log.dir": "/ignored"})
    assert both.log_dirs == [tmp_path / "x", tmp_path / "y"]
