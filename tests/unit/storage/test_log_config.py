"""LogConfig: topic overrides over broker defaults over Kafka's defaults, with validation."""

import pytest

from strata.storage.errors import InvalidConfigError
from strata.storage.log_config import CONFIGS_BY_NAME, LogConfig, validate_topic_configs


def test_kafka_defaults() -> None:
    cfg = LogConfig.from_props()
    assert cfg.segment_bytes == 1073741824
    assert cfg.retention_ms == 604800000
    assert cfg.cleanup_policy == frozenset({"delete"})
    assert cfg.delete and not cfg.compact


def test_topic_override_beats_broker_default() -> None:
    cfg = LogConfig.from_props({"segment.bytes": "1000"}, {"log.segment.bytes": "2000"})
    assert cfg.segment_bytes == 1000
    cfg = LogConfig.from_props({}, {"log.segment.bytes": "2000"})
    assert cfg.segment_bytes == 2000


def test_broker_unit_synonyms_and_ms_precedence() -> None:
    assert LogConfig.from_props({}, {"log.retention.hours": "2"}).retention_ms == 7_200_000
    assert LogConfig.from_props({}, {"log.retention.minutes": "3"}).retention_ms == 180_000
    both = {"log.retention.hours": "2", "log.retention.ms": "5"}
    assert LogConfig.from_props({}, both).retention_ms == 5
    assert LogConfig.from_props({}, {"log.roll.hours": "1"}).segment_ms == 3_600_000


def test_cleanup_policy_forms() -> None:
    cfg = LogConfig.from_props({"cleanup.policy": "compact,delete"})
    assert cfg.compact and cfg.delete
    assert LogConfig.from_props({"cleanup.policy": "compact"}).compact


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "1"),
        ("cleanup.policy", "shred"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("message.timestamp.type", "Whenever"),
        ("unclean.leader.election.enable", "yes"),
        ("retention.ms", "-2"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        validate_topic_configs({key: value})


def test_unknown_topic_config_rejected() -> None:
    with pytest.raises(InvalidConfigError, match=r"no\.such\.config"):
        LogConfig.from_props({"no.such.config": "1"})


def test_to_props_round_trips() -> None:
    cfg = LogConfig.from_props({"cleanup.policy": "compact,delete", "preallocate": "true",
                                "min.cleanable.dirty.ratio": "0.25"})
    props = cfg.to_props()
    assert set(props) == set(CONFIGS_BY_NAME)
    assert LogConfig.from_props(props) == cfg
