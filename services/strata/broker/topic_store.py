"""The topic registry: which topics exist, with their ids, partition counts and configs.

Owns the ``TopicStore`` interface (a ``typing.Protocol``) the broker's control plane talks to,
its single-node implementation ``FileTopicStore``, and Kafka's topic-name rules. In a cluster
``strata.broker.cluster.topic_store.ClusterTopicStore`` implements the same interface.

Interface rules: reads (``topics``, ``get``, ``broker_configs``) are synchronous and answer from
memory (a metadata cache, as Kafka's brokers keep); writes are ``async`` (a remote store needs
a round trip) and each is atomic: it either happened, durably, or raised. Values are immutable
``TopicRecord`` s replaced on change. Writers are the control-plane handlers and the server, on
the event loop; ``FileTopicStore`` serialises writes with an ``asyncio.Lock`` and runs the
fsync in a worker thread, never on the loop.

File format of ``FileTopicStore`` (``<first log dir>/__strata_topics.json``, UTF-8 JSON, written
atomically: ``.tmp``, fsync, rename, fsync dir)::

    {
      "version": 1,
      "topics": {
        "orders": {
          "topic_id": "8c0d1f5e-...",            # a UUID, random, never all zeros
          "replication_factor": 1,
          "leader_epochs": [0, 0, 0],            # one per partition: the count is its length
          "configs": {"retention.ms": "3600000"} # dynamic topic configs (Kafka's names)
        }
      },
      "broker_configs": {"": {...}, "0": {...}}  # dynamic broker configs: "" = cluster default,
    }                                            # else per node id

A later Strata reads every version up to ``FORMAT_VERSION`` (upgrading on its next write) and
refuses a newer one. A malformed file stops the broker rather than forgetting topics.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from strata.storage.checkpoints import atomic_write

TOPIC_STORE_FILE_NAME: Final = "__strata_topics.json"
FORMAT_VERSION: Final = 1

MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")


class TopicStoreError(Exception):
    """The store cannot be read (malformed, or written by a newer Strata)."""


class TopicExistsError(Exception):
    """``create_topic`` of a name that is taken."""


class UnknownTopicError(KeyError):
    """A write naming a topic the store does not hold."""


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One topic as the registry holds it (an immutable value; writes replace it)."""

    name: str
    topic_id: uuid.UUID
    replication_factor: int
    leader_epochs: tuple[int, ...]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.leader_epochs)

    @classmethod
    def new(cls, name: str, partitions: int, replication_factor: int,
            configs: Mapping[str, str] | None = None) -> TopicRecord:
        return cls(name, new_topic_id(), replication_factor, (0,) * partitions,
                   dict(configs or {}))


class TopicStore(Protocol):
    """The registry of topics and dynamic broker configs (see the module docstring)."""

    def topics(self) -> Mapping[str, TopicRecord]:
        """Every topic by name (a read-only snapshot)."""
        ...

    def get(self, name: str) -> TopicRecord | None: ...

    def all_broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        """Every scope's dynamic configs (brokers, and ``client-metrics/<name>`` resources)."""
        ...

    def broker_configs(self, scope: str) -> Mapping[str, str]:
        """Dynamic broker configs of ``scope``: ``""`` = cluster default, else a node id."""
        ...

    async def create_topic(self, record: TopicRecord) -> None:
        """Add ``record``; ``TopicExistsError`` if its name is taken."""
        ...

    async def delete_topic(self, name: str) -> TopicRecord:
        """Remove and return the topic; ``UnknownTopicError`` if absent."""
        ...

    async def set_partition_count(self, name: str, count: int) -> TopicRecord:
        """Grow the topic to ``count`` partitions (new ones at leader epoch 0)."""
        ...

    async def set_leader_epoch(self, name: str, partition: int, epoch: int) -> TopicRecord: ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicRecord:
        """Replace the topic's dynamic configs."""
        ...

    async def set_broker_configs(self, scope: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic broker configs of ``scope``."""
        ...


class FileTopicStore:
    """``TopicStore`` in one JSON file (single node). Build it with ``FileTopicStore.open``."""

    def __init__(self, path: Path, topics: Mapping[str, TopicRecord],
                 broker_configs: Mapping[str, Mapping[str, str]], *, existed: bool) -> None:
        self.path = path
        self.existed = existed  # False when open() found no file (a fresh registry)
        self._topics: Mapping[str, TopicRecord] = MappingProxyType(dict(topics))
        self._broker_configs = {k: dict(v) for k, v in broker_configs.items()}
        self._lock = asyncio.Lock()

    @classmethod
    def open(cls, directory: Path) -> FileTopicStore:
        """Read ``directory/__strata_topics.json`` (absent: an empty registry). Blocking."""
        path = Path(directory) / TOPIC_STORE_FILE_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path, {}, {}, existed=False)
        except (OSError, UnicodeDecodeError) as exc:
            raise TopicStoreError(f"cannot read {path}: {exc}") from exc
        topics, broker_configs = _decode(text, path)
        return cls(path, topics, broker_configs, existed=True)

    # ---------------------------------------------------------------- reads
    def topics(self) -> Mapping[str, TopicRecord]:
        return self._topics

    def get(self, name: str) -> TopicRecord | None:
        return self._topics.get(name)

    def broker_configs(self, scope: str) -> Mapping[str, str]:
        return MappingProxyType(self._broker_configs.get(scope, {}))

    def all_broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        return MappingProxyType(self._broker_configs)

    # ---------------------------------------------------------------- writes
    async def create_topic(self, record: TopicRecord) -> None:
        async with self._lock:
            if record.name in self._topics:
                raise TopicExistsError(record.name)
            await self._commit({**self._topics, record.name: record}, self._broker_configs)

    async def delete_topic(self, name: str) -> TopicRecord:
        async with self._lock:
            record = self._existing(name)
            topics = dict(self._topics)
            del topics[name]
            await self._commit(topics, self._broker_configs)
            return record

    async def set_partition_count(self, name: str, count: int) -> TopicRecord:
        async with self._lock:
            record = self._existing(name)
            if count < record.partitions:
                raise ValueError(f"{name} has {record.partitions} partitions; cannot shrink")
            epochs = record.leader_epochs + (0,) * (count - record.partitions)
            return await self._replace(replace(record, leader_epochs=epochs))

    async def set_leader_epoch(self, name: str, partition: int, epoch: int) -> TopicRecord:
        async with self._lock:
            record = self._existing(name)
            epochs = list(record.leader_epochs)
            epochs[partition] = epoch
            return await self._replace(replace(record, leader_epochs=tuple(epochs)))

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicRecord:
        async with self._lock:
            record = self._existing(name)
            return await self._replace(replace(record, configs=dict(configs)))

    async def set_broker_configs(self, scope: str, configs: Mapping[str, str]) -> None:
        async with self._lock:
            broker_configs = {k: dict(v) for k, v in self._broker_configs.items()}
            if configs:
                broker_configs[scope] = dict(configs)
            else:
                broker_configs.pop(scope, None)
            await self._commit(self._topics, broker_configs)

    # ---------------------------------------------------------------- internals
    def _existing(self, name: str) -> TopicRecord:
        record = self._topics.get(name)
        if record is None:
            raise UnknownTopicError(name)
        return record

    async def _replace(self, record: TopicRecord) -> TopicRecord:
        await self._commit({**self._topics, record.name: record}, self._broker_configs)
        return record

    async def _commit(self, topics: Mapping[str, TopicRecord],
                      broker_configs: Mapping[str, Mapping[str, str]]) -> None:
        """Write the new state durably (in a thread), then make it the one readers see."""
        data = _encode(topics, broker_configs)
        await asyncio.to_thread(self._write, data)
        self._topics = MappingProxyType(dict(topics))
        self._broker_configs = {k: dict(v) for k, v in broker_configs.items()}
        self.existed = True

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, data)


# ------------------------------------------------------------------ the file format


def _encode(topics: Mapping[str, TopicRecord],
            broker_configs: Mapping[str, Mapping[str, str]]) -> bytes:
    doc = {
        "version": FORMAT_VERSION,
        "topics": {
            name: {
                "topic_id": str(record.topic_id),
                "replication_factor": record.replication_factor,
                "leader_epochs": list(record.leader_epochs),
                "configs": dict(sorted(record.configs.items())),
            }
            for name, record in sorted(topics.items())
        },
        "broker_configs": {k: dict(sorted(v.items())) for k, v in sorted(broker_configs.items())},
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def _decode(text: str, path: Path) -> tuple[dict[str, TopicRecord], dict[str, dict[str, str]]]:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        version = doc["version"]
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"bad version {version!r}")
        if version > FORMAT_VERSION:
            raise TopicStoreError(
                f"{path} has format version {version}; this Strata reads up to {FORMAT_VERSION}"
            )
        topics = {name: _decode_topic(name, raw) for name, raw in doc["topics"].items()}
        broker_configs = {
            str(scope): _string_map(values) for scope, values in doc["broker_configs"].items()
        }
    except TopicStoreError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise TopicStoreError(f"{path} is malformed: {type(exc).__name__}: {exc}") from exc
    return topics, broker_configs


def _decode_topic(name: str, raw: Any) -> TopicRecord:
    epochs = tuple(int(e) for e in raw["leader_epochs"])
    return TopicRecord(
        name=str(name),
        topic_id=uuid.UUID(raw["topic_id"]),
        replication_factor=int(raw["replication_factor"]),
        leader_epochs=epochs,
        configs=_string_map(raw.get("configs", {})),
    )


def _string_map(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise TypeError(f"expected an object of strings, got {type(raw).__name__}")
    return {str(k): str(v) for k, v in raw.items()}


# ------------------------------------------------------------------ Kafka's topic rules


def new_topic_id() -> uuid.UUID:
    """A random topic id; never one of Kafka's reserved ids (all-zero high bits, low < 100)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id.int >> 64 or (topic_id.int & ((1 << 64) - 1)) >= 100:
            return topic_id


def invalid_topic_name_reason(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's ``Topic.validate``), or None if it is."""
    if name is None or name == "":
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def colliding_topic(name: str, existing: Mapping[str, object]) -> str | None:
    """An existing topic that differs from ``name`` only by '.' vs '_' (metric names collide)."""
    if "." not in name and "_" not in name:
        return None
    unified = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == unified:
            return other
    return None
