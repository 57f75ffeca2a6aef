"""Topic-level log configs: Kafka's names, types, defaults, broker synonyms, validation.

``TOPIC_CONFIGS`` is the one table of every topic config the storage core honours. Each entry
names the topic key (``segment.bytes``), the broker-level default key it falls back to
(``log.segment.bytes``), the type, Kafka's default and a validator. ``LogConfig`` is the
immutable, typed result for one partition log: topic overrides over broker defaults over Kafka
defaults. DescribeConfigs/AlterConfigs (broker) and the admin API read this table too, so a
config is declared once.

Invariants: a ``LogConfig`` is always valid (construction validates); changing a topic's config
builds a new ``LogConfig`` and swaps it in (no mutation).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from strata.storage.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _policy(raw: str) -> frozenset[str]:
    parts = frozenset(p.strip() for p in raw.split(",") if p.strip())
    if not parts or not parts <= {"delete", "compact"}:
        raise ValueError("expected delete, compact or compact,delete")
    return parts


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return parse


def _int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def _throttled_replicas(name: str) -> Callable[[str], str]:
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or ``partition:broker,...``."""
    def parse(raw: str) -> str:
        items = [item.strip() for item in raw.split(",")]
        if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", i) for i in items)
                or "".join(items) == "*"):
            raise ValueError(f"{name} must be the literal '*' or a list of replicas in the "
                             "following format: [partitionId]:[brokerId],[partitionId]:"
                             "[brokerId],...")
        return raw.strip()
    return parse


def _ratio(raw: str) -> float:
    value = float(raw.strip())
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str  # topic-level key, e.g. "segment.bytes"
    attr: str  # LogConfig attribute
    broker_key: str | None  # broker-level default, e.g. "log.segment.bytes"
    default: str  # Kafka's default, as text
    parse: Callable[[str], Any]
    doc: str


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("segment.bytes", "segment_bytes", "log.segment.bytes", "1073741824",
              _int_range(14, INT_MAX), "Roll a segment when it reaches this size."),
    ConfigDef("segment.ms", "segment_ms", "log.roll.ms", "604800000",
              _int_range(1, LONG_MAX), "Roll a segment after this long even if not full."),
    ConfigDef("segment.jitter.ms", "segment_jitter_ms", "log.roll.jitter.ms", "0",
              _int_range(0, LONG_MAX), "Random jitter subtracted from segment.ms."),
    ConfigDef("segment.index.bytes", "segment_index_bytes", "log.index.size.max.bytes",
              "10485760", _int_range(8, INT_MAX), "Maximum size of an offset or time index."),
    ConfigDef("index.interval.bytes", "index_interval_bytes", "log.index.interval.bytes",
              "4096", _int_range(0, INT_MAX), "Bytes between two offset index entries."),
    ConfigDef("flush.messages", "flush_messages", "log.flush.interval.messages",
              str(LONG_MAX), _int_range(1, LONG_MAX), "fsync after this many messages."),
    ConfigDef("flush.ms", "flush_ms", "log.flush.interval.ms", str(LONG_MAX),
              _int_range(0, LONG_MAX), "fsync when data is older than this."),
    ConfigDef("retention.bytes", "retention_bytes", "log.retention.bytes", "-1",
              _int_range(-1, LONG_MAX), "Delete old segments beyond this size; -1 = no limit."),
    ConfigDef("retention.ms", "retention_ms", "log.retention.ms", "604800000",
              _int_range(-1, LONG_MAX), "Delete segments older than this; -1 = no limit."),
    ConfigDef("max.message.bytes", "max_message_bytes", "message.max.bytes", "1048588",
              _int_range(0, INT_MAX), "Largest record batch accepted."),
    ConfigDef("cleanup.policy", "cleanup_policy", "log.cleanup.policy", "delete", _policy,
              "delete, compact or compact,delete."),
    ConfigDef("delete.retention.ms", "delete_retention_ms", "log.cleaner.delete.retention.ms",
              "86400000", _int_range(0, LONG_MAX), "How long tombstones survive compaction."),
    ConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms",
              "log.cleaner.min.compaction.lag.ms", "0", _int_range(0, LONG_MAX),
              "Minimum age of a record before it may be compacted."),
    ConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms",
              "log.cleaner.max.compaction.lag.ms", str(LONG_MAX), _int_range(1, LONG_MAX),
              "Maximum time a record stays uncompacted."),
    ConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio",
              "log.cleaner.min.cleanable.ratio", "0.5", _ratio,
              "Dirty share of the log above which it is compacted."),
    ConfigDef("file.delete.delay.ms", "file_delete_delay_ms", "log.segment.delete.delay.ms",
              "60000", _int_range(0, LONG_MAX), "Delay before a deleted segment's files go."),
    ConfigDef("message.timestamp.type", "message_timestamp_type",
              "log.message.timestamp.type", "CreateTime",
              _one_of("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime."),
    ConfigDef("message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms",
              "log.message.timestamp.difference.max.ms", str(LONG_MAX),
              _int_range(0, LONG_MAX), "Deprecated: max |timestamp - now| (CreateTime)."),
    ConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms",
              "log.message.timestamp.before.max.ms", str(LONG_MAX), _int_range(0, LONG_MAX),
              "How far in the past a CreateTime timestamp may be (KIP-937)."),
    ConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms",
              "log.message.timestamp.after.max.ms", "3600000", _int_range(0, LONG_MAX),
              "How far in the future a CreateTime timestamp may be (KIP-937)."),
    ConfigDef("min.insync.replicas", "min_insync_replicas", "min.insync.replicas", "1",
              _int_range(1, INT_MAX), "Replicas that must ack an acks=all write."),
    ConfigDef("unclean.leader.election.enable", "unclean_leader_election_enable",
              "unclean.leader.election.enable", "false", _bool,
              "Allow an out-of-sync replica to become leader."),
    ConfigDef("compression.type", "compression_type", "compression.type", "producer",
              _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
              "Codec the log stores; producer keeps what the producer sent."),
    ConfigDef("preallocate", "preallocate", "log.preallocate", "false", _bool,
              "Preallocate segment files."),
    # Read by the broker's replication quotas (KIP-73), not by the log.
    ConfigDef("leader.replication.throttled.replicas", "leader_replication_throttled_replicas",
              None, "", _throttled_replicas("leader.replication.throttled.replicas"),
              "Replicas (partition:broker, or *) throttled on the leader side."),
    ConfigDef("follower.replication.throttled.replicas",
              "follower_replication_throttled_replicas", None, "",
              _throttled_replicas("follower.replication.throttled.replicas"),
              "Replicas (partition:broker, or *) throttled on the follower side."),
)

CONFIGS_BY_NAME: Mapping[str, ConfigDef] = {c.name: c for c in TOPIC_CONFIGS}

# Broker keys that mean the same as another broker key in coarser units (Kafka's synonyms).
_BROKER_UNIT_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 604800000
    max_message_bytes: int = 1048588
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_props(
        cls,
        topic_overrides: Mapping[str, str] | None = None,
        broker_defaults: Mapping[str, str] | None = None,
    ) -> LogConfig:
        """Resolve topic overrides over broker defaults over Kafka's defaults.

        Unknown topic keys and bad values raise ``InvalidConfigError`` naming the key; unknown
        broker keys are ignored here (the broker's own config loader logs them).
        """
        topic_overrides = topic_overrides or {}
        broker = resolve_broker_defaults(broker_defaults or {})
        unknown = sorted(set(topic_overrides) - set(CONFIGS_BY_NAME))
        if unknown:
            raise InvalidConfigError(f"unknown topic config(s): {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for cdef in TOPIC_CONFIGS:
            if cdef.name in topic_overrides:
                raw, source = str(topic_overrides[cdef.name]), cdef.name
            elif cdef.broker_key is not None and cdef.broker_key in broker:
                raw, source = broker[cdef.broker_key], cdef.broker_key
            else:
                continue
            values[cdef.attr] = parse_value(cdef, raw, source)
        return cls(**values)

    def to_props(self) -> dict[str, str]:
        """Every topic config as Kafka text, e.g. for DescribeConfigs."""
        out: dict[str, str] = {}
        for cdef in TOPIC_CONFIGS:
            value = getattr(self, cdef.attr)
            if isinstance(value, frozenset):
                out[cdef.name] = ",".join(sorted(value))
            elif isinstance(value, bool):
                out[cdef.name] = "true" if value else "false"
            else:
                out[cdef.name] = str(value)
        return out


def parse_value(cdef: ConfigDef, raw: str, source: str | None = None) -> Any:
    try:
        return cdef.parse(raw)
    except ValueError as exc:
        name = source or cdef.name
        raise InvalidConfigError(f"invalid value {raw!r} for {name}: {exc}") from None


def resolve_broker_defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """Fold Kafka's unit synonyms (log.retention.hours...) into the ms keys; ms wins."""
    out = {k: str(v) for k, v in broker.items()}
    for ms_key, synonyms in _BROKER_UNIT_SYNONYMS.items():
        if ms_key in out:
            continue
        for key, factor in synonyms:
            if key in out:
                try:
                    out[ms_key] = str(int(out[key]) * factor)
                except ValueError:
                    raise InvalidConfigError(f"invalid value {out[key]!r} for {key}") from None
                break
    return out


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """Raise ``InvalidConfigError`` unless every key is a known topic config with a valid value."""
    LogConfig.from_props(configs)


assert {f.name for f in fields(LogConfig)} == {c.attr for c in TOPIC_CONFIGS}
