"""``BrokerConfig``: the broker's settings, by Kafka's names, from file, environment and flags.

Owns where a broker setting comes from and what it means. Precedence, highest first::

    --override key=value flags  >  STRATA_* environment  >  properties file  >  defaults

``STRATA_LOG_SEGMENT_BYTES=1048576`` sets ``log.segment.bytes`` (lower case, ``_`` -> ``.``;
Kafka's names contain no ``_``). The file is Java ``.properties`` text (Kafka's
``server.properties``), parsed by ``strata.storage.meta_properties.parse_properties``.

Known keys are ``BROKER_SETTINGS`` (the broker's own: listeners, log dirs, limits, schedules)
plus every broker-level default of a topic config in ``strata.storage.log_config.TOPIC_CONFIGS``
(``log.segment.bytes``, ``log.retention.ms``...) and Kafka's coarser-unit synonyms of those
(``log.retention.hours``...): the ``log.*`` values are passed to the ``LogManager`` as given.
Unknown or not-yet-used keys are logged once each, never fatal (docs/operations.md); a bad value
of a known key is fatal, with the key and where it came from in the message.

A ``BrokerConfig`` is immutable once loaded. Dynamic broker configs (AlterConfigs on the broker
resource) live in the ``TopicStore`` and are layered on top by the handlers and the server; they
never mutate this object.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from strata.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES
from strata.storage.log_config import _BROKER_UNIT_SYNONYMS, TOPIC_CONFIGS
from strata.storage.meta_properties import parse_properties

logger = logging.getLogger(__name__)

ENV_PREFIX: Final = "STRATA_"


class ConfigError(ValueError):
    """A known setting with a value it cannot take: the broker refuses to start."""


class ConfigType(enum.IntEnum):
    """Kafka's ``ConfigDef.Type``, numbered as DescribeConfigs v3 reports it."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Origin(enum.Enum):
    """Where a value came from (DescribeConfigs reports file, env and flags alike as static)."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


@dataclass(frozen=True, slots=True)
class BrokerSetting:
    name: str
    default: str | None
    type: ConfigType
    doc: str


BROKER_SETTINGS: Final[tuple[BrokerSetting, ...]] = (
    BrokerSetting("node.id", "0", ConfigType.INT, "This broker's id in the cluster."),
    BrokerSetting("broker.id", None, ConfigType.INT, "Kafka's older name of node.id."),
    BrokerSetting("cluster.id", None, ConfigType.STRING,
                  "Cluster id; default: the one in meta.properties, else a new one."),
    BrokerSetting("listeners", "PLAINTEXT://127.0.0.1:9092", ConfigType.LIST,
                  "Where the Kafka protocol is served; port 0 picks a free port."),
    BrokerSetting("advertised.listeners", None, ConfigType.LIST,
                  "What clients are told to connect to; default: listeners."),
    BrokerSetting("log.dirs", None, ConfigType.LIST,
                  "Comma-separated data directories; default: log.dir."),
    BrokerSetting("log.dir", "/tmp/strata-logs", ConfigType.STRING,
                  "The data directory when log.dirs is not set."),
    BrokerSetting("num.partitions", "1", ConfigType.INT, "Default partitions of a new topic."),
    BrokerSetting("default.replication.factor", "1", ConfigType.INT,
                  "Default replication factor of a new topic."),
    BrokerSetting("auto.create.topics.enable", "true", ConfigType.BOOLEAN,
                  "Create a topic when Metadata asks for an unknown one."),
    BrokerSetting("delete.topic.enable", "true", ConfigType.BOOLEAN,
                  "Allow DeleteTopics."),
    BrokerSetting("socket.request.max.bytes", str(DEFAULT_SOCKET_REQUEST_MAX_BYTES),
                  ConfigType.INT, "The largest request frame accepted."),
    BrokerSetting("queued.max.requests", "500", ConfigType.INT,
                  "Requests read but not yet handled, across connections, before reading pauses."),
    BrokerSetting("max.incremental.fetch.session.cache.slots", "1000", ConfigType.INT,
                  "At most this many fetch sessions (KIP-227) are cached."),
    BrokerSetting("min.incremental.fetch.session.eviction.ms", "120000", ConfigType.INT,
                  "A fetch session unused this long may be evicted for a new one."),
    BrokerSetting("telemetry.max.bytes", "1048576", ConfigType.INT,
                  "The maximum size (after compression if compression is used) of telemetry "
                  "metrics pushed from a client to the broker (KIP-714)."),
    BrokerSetting("max.request.partition.size.limit", "2000", ConfigType.INT,
                  "At most this many partitions in one DescribeTopicPartitions answer."),
    BrokerSetting("quota.window.num", "11", ConfigType.INT,
                  "Samples a client quota's rate is measured over."),
    BrokerSetting("quota.window.size.seconds", "1", ConfigType.INT,
                  "The time span of each client quota sample."),
    BrokerSetting("replication.quota.window.num", "11", ConfigType.INT,
                  "Samples a replication throttle's rate is measured over (KIP-73)."),
    BrokerSetting("replication.quota.window.size.seconds", "1", ConfigType.INT,
                  "The time span of each replication throttle sample."),
    BrokerSetting("http.port", "9404", ConfigType.INT,
                  "Port of /healthz, /readyz and /metrics; 0 picks a free port."),
    BrokerSetting("strata.max.partitions.per.broker", None, ConfigType.INT,
                  "At most this many partition replicas on this broker (it can only lower the "
                  "capacity the open file limit allows); CreateTopics, CreatePartitions and "
                  "auto-creation beyond it answer POLICY_VIOLATION."),
    BrokerSetting("metadata.store", None, ConfigType.STRING,
                  "sqlite:///path or etcd://host:port,...: the cluster's metadata store. Unset: "
                  "a single broker keeping its topics in its first log dir."),
    # The cluster (cluster_*.py, controller.py), with KRaft's names where Kafka has one.
    BrokerSetting("broker.session.timeout.ms", "9000", ConfigType.INT,
                  "TTL of a broker's registration lease: a broker silent this long is dead."),
    BrokerSetting("controlled.shutdown.enable", "true", ConfigType.BOOLEAN,
                  "Move leadership away before a broker shuts down."),
    BrokerSetting("auto.leader.rebalance.enable", "true", ConfigType.BOOLEAN,
                  "The controller moves leadership back to preferred replicas."),
    BrokerSetting("leader.imbalance.check.interval.seconds", "300", ConfigType.LONG,
                  "How often the controller checks for non-preferred leaders."),
    BrokerSetting("replica.fetch.wait.max.ms", "500", ConfigType.INT,
                  "A follower's fetch max wait."),
    BrokerSetting("replica.fetch.min.bytes", "1", ConfigType.INT,
                  "A follower's fetch min bytes."),
    BrokerSetting("replica.fetch.max.bytes", "1048576", ConfigType.INT,
                  "A follower's fetch max bytes per partition."),
    BrokerSetting("replica.fetch.response.max.bytes", "10485760", ConfigType.INT,
                  "A follower's fetch max bytes per response."),
    BrokerSetting("replica.fetch.backoff.ms", "1000", ConfigType.INT,
                  "How long a follower waits after a failed fetch."),
    BrokerSetting("replica.socket.timeout.ms", "30000", ConfigType.INT,
                  "A follower's request timeout towards the leader."),
    BrokerSetting("num.recovery.threads.per.data.dir", "2", ConfigType.INT,
                  "Threads per log dir loading partitions at startup."),
    # Kafka's default is Long.MAX_VALUE (flush only by flush.messages inline); Strata's storage
    # checks flush.messages / flush.ms on this schedule, in a worker thread.
    BrokerSetting("log.flush.scheduler.interval.ms", "1000", ConfigType.LONG,
                  "How often logs are checked for a due fsync."),
    BrokerSetting("log.flush.offset.checkpoint.interval.ms", "60000", ConfigType.INT,
                  "How often the recovery-point checkpoint is written."),
    BrokerSetting("log.flush.start.offset.checkpoint.interval.ms", "60000", ConfigType.INT,
                  "How often the log-start-offset checkpoint is written."),
    BrokerSetting("replica.high.watermark.checkpoint.interval.ms", "5000", ConfigType.LONG,
                  "How often the high watermarks are written to replication-offset-checkpoint "
                  "(where a restarted broker's high watermarks come from)."),
    BrokerSetting("log.retention.check.interval.ms", "300000", ConfigType.LONG,
                  "How often retention deletes old segments."),
    BrokerSetting("producer.id.expiration.ms", "86400000", ConfigType.INT,
                  "How long an idle idempotent producer's state is kept."),
    BrokerSetting("producer.id.expiration.check.interval.ms", "600000", ConfigType.INT,
                  "How often expired producer ids are removed."),
    BrokerSetting("broker.rack", "", ConfigType.STRING,
                  "The rack of this broker, for rack-aware replica placement (empty: none)."),
    # Replication (partition.py, replica_manager.py).
    BrokerSetting("replica.lag.time.max.ms", "30000", ConfigType.LONG,
                  "A follower not caught up with the leader for this long leaves the ISR."),
    # The group coordinator (group_coordinator.py) and its topic __consumer_offsets.
    BrokerSetting("group.min.session.timeout.ms", "6000", ConfigType.INT,
                  "The smallest session.timeout.ms a consumer may join a group with."),
    BrokerSetting("group.max.session.timeout.ms", "1800000", ConfigType.INT,
                  "The largest session.timeout.ms a consumer may join a group with."),
    BrokerSetting("group.initial.rebalance.delay.ms", "3000", ConfigType.INT,
                  "How long the first rebalance of an empty group waits for more members."),
    BrokerSetting("group.max.size", "2147483647", ConfigType.INT,
                  "The most members a group may have."),
    # The consumer groups of KIP-848 (group/consumer_group_coordinator.py).
    BrokerSetting("group.consumer.session.timeout.ms", "45000", ConfigType.INT,
                  "A consumer group member is removed after this long without a heartbeat."),
    BrokerSetting("group.consumer.min.session.timeout.ms", "45000", ConfigType.INT,
                  "Lower bound of group.consumer.session.timeout.ms."),
    BrokerSetting("group.consumer.max.session.timeout.ms", "60000", ConfigType.INT,
                  "Upper bound of group.consumer.session.timeout.ms."),
    BrokerSetting("group.consumer.heartbeat.interval.ms", "5000", ConfigType.INT,
                  "How often consumer group members are told to heartbeat."),
    BrokerSetting("group.consumer.min.heartbeat.interval.ms", "5000", ConfigType.INT,
                  "Lower bound of group.consumer.heartbeat.interval.ms."),
    BrokerSetting("group.consumer.max.heartbeat.interval.ms", "15000", ConfigType.INT,
                  "Upper bound of group.consumer.heartbeat.interval.ms."),
    BrokerSetting("group.consumer.max.size", "2147483647", ConfigType.INT,
                  "The most members a consumer group may have."),
    BrokerSetting("group.consumer.assignors", "uniform,range", ConfigType.LIST,
                  "The server-side assignors (names or Kafka's class names); the first is "
                  "the default."),
    BrokerSetting("offsets.topic.num.partitions", "50", ConfigType.INT,
                  "Partitions of __consumer_offsets (fixed once the topic exists)."),
    BrokerSetting("offsets.topic.replication.factor", "3", ConfigType.INT,
                  "Replication factor of __consumer_offsets, capped at the live brokers."),
    BrokerSetting("offsets.topic.segment.bytes", "104857600", ConfigType.INT,
                  "segment.bytes of __consumer_offsets."),
    BrokerSetting("offsets.retention.minutes", "10080", ConfigType.INT,
                  "How long committed offsets of a group without members are kept."),
    BrokerSetting("offsets.retention.check.interval.ms", "600000", ConfigType.LONG,
                  "How often expired offsets are removed."),
    BrokerSetting("offset.metadata.max.bytes", "4096", ConfigType.INT,
                  "The largest metadata string an offset commit may carry."),
    # The transaction coordinator (strata.broker.transaction) and its topic __transaction_state.
    BrokerSetting("transaction.state.log.num.partitions", "50", ConfigType.INT,
                  "Partitions of __transaction_state (fixed once the topic exists)."),
    BrokerSetting("transaction.state.log.replication.factor", "3", ConfigType.SHORT,
                  "Replication factor of __transaction_state, capped at the live brokers."),
    BrokerSetting("transaction.state.log.min.isr", "2", ConfigType.INT,
                  "min.insync.replicas of __transaction_state."),
    BrokerSetting("transaction.state.log.segment.bytes", "104857600", ConfigType.INT,
                  "segment.bytes of __transaction_state."),
    BrokerSetting("transaction.max.timeout.ms", "900000", ConfigType.INT,
                  "The largest transaction.timeout.ms a producer may ask for "
                  "(INVALID_TRANSACTION_TIMEOUT above it)."),
    BrokerSetting("transactional.id.expiration.ms", "604800000", ConfigType.INT,
                  "A transactional id without a transaction this long is forgotten."),
    BrokerSetting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000",
                  ConfigType.INT, "How often transactions past their timeout are aborted."),
    BrokerSetting("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000",
                  ConfigType.INT, "How often expired transactional ids are removed."),
    BrokerSetting("transaction.version", "2", ConfigType.SHORT,
                  "The transaction.version feature level in use (Kafka finalizes it with "
                  "kafka-features.sh): 0 = transactions v1, 1 = flexible __transaction_state "
                  "values, 2 = transactions v2 (KIP-890, the epoch bumped at every EndTxn)."),
    BrokerSetting("transaction.partition.verification.enable", "true", ConfigType.BOOLEAN,
                  "Partition leaders ask the transaction coordinator whether a transactional "
                  "produce's partition is in the transaction before appending it (KIP-890: "
                  "no hanging transactions)."),
    # Security (strata.broker.security). Any of the ssl.* / sasl.* keys may also be set per
    # listener as listener.name.<name>.<key> (Kafka's rule; those keys are always known).
    BrokerSetting("listener.security.protocol.map",
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  ConfigType.STRING,
                  "Listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    BrokerSetting("inter.broker.listener.name", None, ConfigType.STRING,
                  "The listener followers fetch from; default: by security.inter.broker.protocol."),
    BrokerSetting("security.inter.broker.protocol", "PLAINTEXT", ConfigType.STRING,
                  "The inter-broker listener's protocol when inter.broker.listener.name is unset."),
    BrokerSetting("sasl.mechanism.inter.broker.protocol", None, ConfigType.STRING,
                  "The SASL mechanism a follower logs in to a SASL inter-broker listener with."),
    BrokerSetting("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", ConfigType.LIST,
                  "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, "
                  "GSSAPI, is not served)."),
    BrokerSetting("sasl.jaas.config", None, ConfigType.PASSWORD,
                  "A login module line with this broker's username=\"..\" password=\"..\"."),
    BrokerSetting("connection.failed.authentication.delay.ms", "100", ConfigType.INT,
                  "How long a connection whose authentication failed stays open."),
    BrokerSetting("ssl.keystore.type", "PEM", ConfigType.STRING, "PEM only."),
    BrokerSetting("ssl.keystore.location", None, ConfigType.STRING,
                  "A PEM file with this broker's certificate chain and private key."),
    BrokerSetting("ssl.keystore.certificate.chain", None, ConfigType.PASSWORD,
                  "The certificate chain as PEM text (with ssl.keystore.key)."),
    BrokerSetting("ssl.keystore.key", None, ConfigType.PASSWORD, "The private key as PEM text."),
    BrokerSetting("ssl.key.password", None, ConfigType.PASSWORD,
                  "The password of an encrypted private key."),
    BrokerSetting("ssl.truststore.type", "PEM", ConfigType.STRING, "PEM only."),
    BrokerSetting("ssl.truststore.location", None, ConfigType.STRING,
                  "A PEM file of the CA certificates trusted for peers."),
    BrokerSetting("ssl.truststore.certificates", None, ConfigType.PASSWORD,
                  "The trusted CA certificates as PEM text."),
    BrokerSetting("ssl.client.auth", "none", ConfigType.STRING,
                  "Client certificates: required, requested or none."),
    BrokerSetting("ssl.endpoint.identification.algorithm", "https", ConfigType.STRING,
                  "https: a follower checks the leader's host name against its certificate."),
    # Authorization (strata.broker.security.authorization).
    BrokerSetting("authorizer.class.name", None, ConfigType.STRING,
                  "Enables ACLs: org.apache.kafka.metadata.authorizer.StandardAuthorizer, "
                  "kafka.security.authorizer.AclAuthorizer or strata.acl; unset: all allowed."),
    BrokerSetting("super.users", None, ConfigType.STRING,
                  "Principals allowed everything, separated by semicolons (User:admin;User:b)."),
    BrokerSetting("allow.everyone.if.no.acl.found", "false", ConfigType.BOOLEAN,
                  "With an authorizer: allow a resource that no ACL names at all."),
)

SETTINGS_BY_NAME: Final[Mapping[str, BrokerSetting]] = {s.name: s for s in BROKER_SETTINGS}

# Broker-level defaults of topic configs, and Kafka's coarser-unit synonyms of two of them.
LOG_DEFAULT_KEYS: Final[frozenset[str]] = frozenset(
    c.broker_key for c in TOPIC_CONFIGS if c.broker_key is not None
)
# log_config keeps this table private; it is the one statement of Kafka's unit synonyms.
BROKER_UNIT_SYNONYMS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = _BROKER_UNIT_SYNONYMS
UNIT_SYNONYM_KEYS: Final[frozenset[str]] = frozenset(
    key for synonyms in BROKER_UNIT_SYNONYMS.values() for key, _ in synonyms
)
# Read by the storage core itself (``strata.storage.log_cleaner.CleanerConfig.from_props``, from
# the props the LogManager gets), with their defaults there.
CLEANER_KEYS: Final[frozenset[str]] = frozenset({
    "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.backoff.ms",
})
KNOWN_KEYS: Final[frozenset[str]] = (
    frozenset(SETTINGS_BY_NAME) | LOG_DEFAULT_KEYS | UNIT_SYNONYM_KEYS | CLEANER_KEYS
)


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners`` / ``advertised.listeners``."""

    name: str
    host: str  # "" = every interface (Kafka's rule for an empty host)
    port: int

    @classmethod
    def parse(cls, text: str, key: str) -> Listener:
        name, sep, rest = text.strip().partition("://")
        if not sep or not name:
            raise ConfigError(f"{key}: {text!r} is not NAME://host:port")
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            raise ConfigError(f"{key}: {text!r} has no port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(f"{key}: port {port_text!r} of {text!r} is not a number") from None
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} of {text!r} is out of range")
        return cls(name.upper(), host, port)


class BrokerConfig:
    """Merged broker settings. Build with ``BrokerConfig.load`` (or directly in tests)."""

    def __init__(
        self, values: Mapping[str, str], origins: Mapping[str, Origin] | None = None
    ) -> None:
        self._values = {k: str(v) for k, v in values.items()}
        self._origins = dict(origins or {})
        self._validate()

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        path: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Iterable[str] | Mapping[str, str] = (),
    ) -> BrokerConfig:
        """File, then ``STRATA_*`` env (``os.environ`` by default), then ``key=value`` flags."""
        values: dict[str, str] = {}
        origins: dict[str, Origin] = {}
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
            for key, value in parse_properties(text).items():
                values[key], origins[key] = value, Origin.FILE
        for key, value in env_settings(os.environ if env is None else env).items():
            values[key], origins[key] = value, Origin.ENV
        for key, value in parse_overrides(overrides).items():
            values[key], origins[key] = value, Origin.FLAG
        config = cls(values, origins)
        for key in config.unknown_keys():
            logger.warning("unknown or not yet used config %s=%r (%s) is ignored", key,
                           values[key], origins[key].value)
        return config

    def _validate(self) -> None:
        """Type-check every known key that is set, so a bad value fails at startup."""
        for key in self._values:
            setting = SETTINGS_BY_NAME.get(key)
            if setting is None:
                continue
            if setting.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
                self.get_int(key)
            elif setting.type is ConfigType.BOOLEAN:
                self.get_bool(key)
        self.listeners  # noqa: B018 - parses and validates
        self._advertised_as_configured()
        if self.node_id < 0:
            raise ConfigError(f"node.id must be >= 0, got {self.node_id}")

    # ----------------------------------------------------------------- raw access
    def explicit(self) -> dict[str, str]:
        """Every key set by file, environment or flag (known or not), as given."""
        return dict(self._values)

    def is_set(self, key: str) -> bool:
        return key in self._values

    def origin(self, key: str) -> Origin:
        if key in self._values:
            return self._origins.get(key, Origin.FILE)
        return Origin.DEFAULT

    def unknown_keys(self) -> list[str]:
        return sorted(k for k in self._values
                      if k not in KNOWN_KEYS and not k.startswith("listener.name."))

    def get(self, key: str) -> str | None:
        """The value set, else the default of a known setting, else None."""
        if key in self._values:
            return self._values[key]
        setting = SETTINGS_BY_NAME.get(key)
        return setting.default if setting is not None else None

    def _require(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise ConfigError(f"{key} is not set and has no default")
        return value

    def get_int(self, key: str) -> int:
        raw = self._require(key)
        try:
            return int(raw.strip())
        except ValueError:
            origin = self.origin(key).value
            raise ConfigError(f"{key}={raw!r} ({origin}) is not an integer") from None

    def get_bool(self, key: str) -> bool:
        raw = self._require(key)
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r} ({self.origin(key).value}) is not true or false")
        return lowered == "true"

    def get_list(self, key: str) -> list[str]:
        raw = self.get(key)
        if raw is None:
            return []
        return [item.strip() for item in raw.split(",") if item.strip()]

    # ----------------------------------------------------------------- typed views
    @property
    def node_id(self) -> int:
        if not self.is_set("node.id") and self.is_set("broker.id"):
            return self.get_int("broker.id")
        return self.get_int("node.id")

    @property
    def cluster_id(self) -> str | None:
        return self.get("cluster.id")

    @property
    def listeners(self) -> list[Listener]:
        listeners = [Listener.parse(item, "listeners") for item in self.get_list("listeners")]
        if not listeners:
            raise ConfigError("listeners names no listener")
        return listeners

    @property
    def listener(self) -> Listener:
        """The first listener (its host also serves HTTP; every listener is served)."""
        return self.listeners[0]

    @property
    def advertised_listener(self) -> Listener:
        """What Metadata tells clients; an empty or wildcard host becomes this host's name."""
        listener = self._advertised_as_configured()
        if listener.host in ("", "0.0.0.0", "::"):
            listener = Listener(listener.name, socket.getfqdn(), listener.port)
        return listener

    def _advertised_as_configured(self) -> Listener:
        items = self.get_list("advertised.listeners")
        return Listener.parse(items[0], "advertised.listeners") if items else self.listener

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get_list("log.dirs") or self.get_list("log.dir")
        if not dirs:
            raise ConfigError("log.dirs names no directory")
        return [Path(d).expanduser() for d in dirs]

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def queued_max_requests(self) -> int:
        return self.get_int("queued.max.requests")

    @property
    def http_port(self) -> int:
        return self.get_int("http.port")

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get_int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @property
    def delete_topic_enable(self) -> bool:
        return self.get_bool("delete.topic.enable")

    def log_manager_props(self) -> dict[str, str]:
        """What the ``LogManager`` takes as broker defaults: every explicitly set key, as given.

        Keys the storage core does not know are ignored there; defaults stay Kafka's (in
        ``LogConfig``), so DescribeConfigs can tell a static broker value from a default.
        """
        return dict(self._values)


def env_settings(env: Mapping[str, str]) -> dict[str, str]:
    """``STRATA_LOG_SEGMENT_BYTES=1`` -> ``{"log.segment.bytes": "1"}``."""
    out = {}
    for name, value in env.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            out[name[len(ENV_PREFIX):].lower().replace("_", ".")] = value
    return out


def parse_overrides(overrides: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    """``["a.b=1", "c=x=y"]`` -> ``{"a.b": "1", "c": "x=y"}``; a flag without ``=`` is an error."""
    if isinstance(overrides, Mapping):
        return {str(k): str(v) for k, v in overrides.items()}
    out = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out
