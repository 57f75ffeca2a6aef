"""``BrokerConfig``: the broker's settings, by Kafka's names, from file, environment and flags.

Owns where a broker setting comes from and what it means. Precedence, highest first::

    --override key=value flags  >  STRATA_* environment  >  properties file  >  defaults

``STRATA_LOG_SEGMENT_BYTES=1048576`` sets ``log.segment.bytes`` (lower case, ``_`` -> ``.``;
Kafka's names contain no ``_``). The file is Java ``.properties`` text (Kafka's
``server.properties``), parsed by ``strata.storage.meta_properties.parse_properties``.

Known keys are ``BROKER_SETTINGS`` (``strata.broker.broker_settings``: the broker's own:
listeners, log dirs, limits, schedules)
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

from strata.broker.broker_settings import SETTINGS_BY_NAME, ConfigType
from strata.storage.log_config import _BROKER_UNIT_SYNONYMS, TOPIC_CONFIGS
from strata.storage.meta_properties import parse_properties

logger = logging.getLogger(__name__)

ENV_PREFIX: Final = "STRATA_"


class ConfigError(ValueError):
    """A known setting with a value it cannot take: the broker refuses to start."""


class Origin(enum.Enum):
    """Where a value came from (DescribeConfigs reports file, env and flags alike as static)."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


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
