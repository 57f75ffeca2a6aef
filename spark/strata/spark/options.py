"""Options of the ``strata`` data source, parsed and checked once, with Spark's Kafka names.

Owns the translation from Spark's string options (case-insensitive keys, as Spark hands them
over) to a frozen :class:`SourceOptions` / :class:`SinkOptions`. Pure: no Spark, no sockets, so
every rule is unit-tested. Invariants of a parsed :class:`SourceOptions`:

- exactly one subscription: ``subscribe`` (comma-separated topics), ``subscribePattern`` (a
  regular expression matched against whole topic names) or ``assign`` (JSON
  ``{"topic": [0, 1]}``);
- ``startingOffsets`` / ``endingOffsets`` are :data:`EARLIEST`, :data:`LATEST` or a per-partition
  map whose values are offsets, -2 (earliest) or -1 (latest), exactly as Spark's Kafka source;
  a batch query may not start at ``latest`` nor end at ``earliest`` (nor use -1 / -2 that way);
- ``startingTimestamp`` (epoch ms) wins over ``startingOffsets`` when both are set, as in Spark;
- ``kafka.*`` keys are passed to the client with the prefix stripped, except the ones the source
  owns (``group.id`` is allowed; auto commit and offset reset are fixed by the source);
- ``kafka.isolation.level`` is ``read_uncommitted`` (the Java consumer's default, which Spark's
  Kafka source keeps) or ``read_committed``; it is kept in :attr:`SourceOptions.isolation_level`,
  not in the client config (the readers set it on every request and client themselves);
- ``kafka.transactional.id.prefix`` (sink only) makes each write task transactional with the id
  ``<prefix>-<Spark partition id>``; ``kafka.transactional.id`` itself is refused (every task
  would share one id and fence the others).

Every error is a :class:`StrataOptionError` whose message starts with the option's name, raised
while Spark plans the query (``DataSource.schema``/``reader``), never inside a task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

EARLIEST: Final = "earliest"
LATEST: Final = "latest"
# Kafka's sentinel offsets in the JSON form of startingOffsets / endingOffsets.
EARLIEST_OFFSET: Final = -2
LATEST_OFFSET: Final = -1

# The sink's option naming the transactional ids of its tasks (without the "kafka." prefix).
TRANSACTIONAL_ID_PREFIX: Final = "transactional.id.prefix"
# Client keys the source sets itself: a user value would break its guarantees.
_OWNED_CLIENT_KEYS: Final = frozenset(
    {"enable.auto.commit", "auto.offset.reset", "key.deserializer", "value.deserializer",
     "key.serializer", "value.serializer", "enable.partition.eof"}
)

Subscription = Literal["subscribe", "subscribePattern", "assign"]
IsolationLevel = Literal["read_uncommitted", "read_committed"]
READ_UNCOMMITTED: Final = "read_uncommitted"
READ_COMMITTED: Final = "read_committed"
# "earliest", "latest", or {topic: {partition: offset-or-sentinel}}.
OffsetSpec = str | Mapping[str, Mapping[int, int]]


class StrataOptionError(ValueError):
    """A missing, unknown-valued or contradictory option; the message names the option."""


@dataclass(frozen=True)
class SourceOptions:
    """The reader's options, checked. ``client_config`` is what every consumer gets."""

    bootstrap_servers: str
    subscription: Subscription
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starting: OffsetSpec = LATEST
    ending: OffsetSpec = LATEST
    starting_timestamp_ms: int | None = None
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    isolation_level: IsolationLevel = READ_UNCOMMITTED
    client_config: Mapping[str, str] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        """Whether reads skip aborted transactions and stop at the last stable offset."""
        return self.isolation_level == READ_COMMITTED

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to the subscription (internal ``__`` topics never do for a
        pattern, as Kafka's consumers exclude internal topics)."""
        if self.subscription == "subscribe":
            return topic in self.topics
        if self.subscription == "assign":
            return topic in self.assigned
        assert self.pattern is not None
        return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class SinkOptions:
    """The writer's options: the default topic (a ``topic`` column wins per row), the client,
    and the transactional id prefix (``None``: idempotent, not transactional)."""

    bootstrap_servers: str
    topic: str | None
    client_config: Mapping[str, str] = field(default_factory=dict)
    transactional_id_prefix: str | None = None


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Option keys lower-cased (Spark matches option names case-insensitively)."""
    return {key.lower(): str(value) for key, value in options.items()}


def _client_config(opts: Mapping[str, str]) -> dict[str, str]:
    # Spark lower-cases option keys; Kafka client keys are lower-case anyway.
    config: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in _OWNED_CLIENT_KEYS:
            raise StrataOptionError(
                f"kafka.{name}: not supported, the strata source manages it itself"
            )
        config[name] = value
    bootstrap = config.pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise StrataOptionError(
            "kafka.bootstrap.servers: required (e.g. .option('kafka.bootstrap.servers', "
            "'127.0.0.1:9092'))"
        )
    config["bootstrap.servers"] = bootstrap
    return config


def _positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise StrataOptionError(f"{name}: must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise StrataOptionError(f"{name}: must be a positive integer, got {raw!r}")
    return value


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise StrataOptionError(f"{name}: must be true or false, got {raw!r}")


def parse_assign(raw: str) -> dict[str, tuple[int, ...]]:
    """``{"topicA": [0, 1], "topicB": [2]}`` -> ``{"topicA": (0, 1), "topicB": (2,)}``."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StrataOptionError(
            f'assign: must be JSON like {{"topic": [0, 1]}}, got {raw!r} ({exc})'
        ) from None
    if not isinstance(value, dict) or not value:
        raise StrataOptionError(f'assign: must be a non-empty JSON object like {{"t": [0]}}, '
                                f"got {raw!r}")
    result: dict[str, tuple[int, ...]] = {}
    for topic, partitions in value.items():
        if (not isinstance(partitions, list) or not partitions
                or not all(isinstance(p, int) and p >= 0 for p in partitions)):
            raise StrataOptionError(
                f"assign: topic {topic!r} needs a non-empty list of partition numbers"
            )
        result[topic] = tuple(sorted(set(partitions)))
    return result


def parse_offset_spec(raw: str, name: str) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON ``{"topic": {"0": 23, "1": -2}}``."""
    text = raw.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise StrataOptionError(
            f'{name}: must be "earliest", "latest" or JSON like {{"topic": {{"0": 23}}}}, '
            f"got {raw!r}"
        ) from None
    if not isinstance(value, dict) or not value:
        raise StrataOptionError(f'{name}: JSON must be an object like {{"topic": {{"0": 23}}}}')
    spec: dict[str, dict[int, int]] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            raise StrataOptionError(
                f"{name}: topic {topic!r} needs an object of partition -> offset"
            )
        per_topic: dict[int, int] = {}
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise StrataOptionError(
                    f"{name}: partition {partition!r} of {topic!r} is not a number"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise StrataOptionError(
                    f"{name}: offset of {topic}-{number} must be >= 0, -2 (earliest) or "
                    f"-1 (latest), got {offset!r}"
                )
            per_topic[number] = offset
        spec[topic] = per_topic
    return spec


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting == LATEST:
        raise StrataOptionError('startingOffsets: "latest" is not allowed in a batch query')
    if ending == EARLIEST:
        raise StrataOptionError('endingOffsets: "earliest" is not allowed in a batch query')
    if isinstance(starting, Mapping):
        for topic, partitions in starting.items():
            for partition, offset in partitions.items():
                if offset == LATEST_OFFSET:
                    raise StrataOptionError(
                        f"startingOffsets: -1 (latest) for {topic}-{partition} is not allowed "
                        "in a batch query"
                    )
    if isinstance(ending, Mapping):
        for topic, partitions in ending.items():
            for partition, offset in partitions.items():
                if offset == EARLIEST_OFFSET:
                    raise StrataOptionError(
                        f"endingOffsets: -2 (earliest) for {topic}-{partition} is not allowed "
                        "in a batch query"
                    )


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Check the reader's options; ``streaming`` selects the defaults and the allowed ones
    (``None``: not known yet, as in ``DataSource.schema``; only the common rules apply)."""
    opts = lower_keys(options)
    client = _client_config(opts)
    chosen = [name for name in ("subscribe", "subscribePattern", "assign")
              if name.lower() in opts]
    if len(chosen) != 1:
        found = ", ".join(chosen) if chosen else "none"
        raise StrataOptionError(
            f"subscribe/subscribePattern/assign: exactly one is required, found {found}"
        )
    if TRANSACTIONAL_ID_PREFIX in client:
        raise StrataOptionError(
            "kafka.transactional.id.prefix: a sink option, not a source one"
        )
    isolation_level = _isolation_level(client)
    subscription: Subscription = chosen[0]  # type: ignore[assignment]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: dict[str, tuple[int, ...]] = {}
    if subscription == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise StrataOptionError("subscribe: needs at least one topic name")
    elif subscription == "subscribePattern":
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise StrataOptionError(f"subscribePattern: invalid regular expression ({exc})") \
                from None
    else:
        assigned = parse_assign(opts["assign"])

    starting = parse_offset_spec(opts.get("startingoffsets",
                                          LATEST if streaming else EARLIEST), "startingOffsets")
    if "endingoffsets" in opts and streaming is True:
        raise StrataOptionError("endingOffsets: only allowed in a batch query")
    ending = parse_offset_spec(opts.get("endingoffsets", LATEST), "endingOffsets")
    timestamp: int | None = None
    if "startingtimestamp" in opts:
        raw = opts["startingtimestamp"]
        try:
            timestamp = int(raw)
        except ValueError:
            raise StrataOptionError(
                f"startingTimestamp: must be milliseconds since the epoch, got {raw!r}"
            ) from None
        if timestamp < 0:
            raise StrataOptionError(f"startingTimestamp: must be >= 0, got {raw!r}")
    if streaming is False:
        _check_batch_bounds(EARLIEST if timestamp is not None else starting, ending)
        if "maxoffsetspertrigger" in opts:
            raise StrataOptionError("maxOffsetsPerTrigger: only allowed in a streaming query")

    return SourceOptions(
        bootstrap_servers=client["bootstrap.servers"],
        subscription=subscription,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        starting_timestamp_ms=timestamp,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger",
                                              "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                      "kafkaConsumer.pollTimeoutMs") or 120_000,
        isolation_level=isolation_level,
        client_config=client,
    )


def _isolation_level(client: dict[str, str]) -> IsolationLevel:
    """``kafka.isolation.level``, taken out of ``client`` (default: read_uncommitted)."""
    raw = client.pop("isolation.level", READ_UNCOMMITTED)
    level = raw.strip().lower()
    if level == READ_COMMITTED:
        return READ_COMMITTED
    if level == READ_UNCOMMITTED:
        return READ_UNCOMMITTED
    raise StrataOptionError(
        f"kafka.isolation.level: must be read_uncommitted or read_committed, got {raw!r}"
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check the writer's options: ``kafka.bootstrap.servers``, an optional ``topic`` and an
    optional ``kafka.transactional.id.prefix``."""
    opts = lower_keys(options)
    client = _client_config(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise StrataOptionError("topic: must not be empty")
    if "transactional.id" in client:
        raise StrataOptionError(
            "kafka.transactional.id: not supported (every task would share it); set "
            "kafka.transactional.id.prefix and each task uses <prefix>-<partition id>"
        )
    prefix = client.pop(TRANSACTIONAL_ID_PREFIX, None)
    if prefix is not None:
        prefix = prefix.strip()
        if not prefix:
            raise StrataOptionError("kafka.transactional.id.prefix: must not be empty")
    return SinkOptions(bootstrap_servers=client["bootstrap.servers"],
                       topic=topic.strip() if topic else None, client_config=client,
                       transactional_id_prefix=prefix)
