"""The cluster's metadata as values: brokers, topics, partitions, the controller — and their keys.

Pure (no I/O). Owns the key layout of the metadata store (``strata.metadata``) and the JSON
encoding of each value, and ``ClusterImage``: an immutable snapshot of all of it that the
broker's ``MetadataCache`` replaces on every change (Kafka's ``MetadataImage``). ``build_image``
makes one from every entry (after a listing); ``image_builder.ImageBuilder`` makes the next one
from the previous and the keys that changed, to the same result, and records on it which
partitions changed (``changed_partitions``, Kafka's ``MetadataDelta``).

Keys (every one under ``ROOT``; values UTF-8 JSON objects carrying ``"v": FORMAT_VERSION`` so a
later Strata can upgrade them in a rolling restart; a reader refuses a newer version)::

    /strata/brokers/<node.id>           leased by the broker  BrokerRegistration
    /strata/controller                  leased by controller  {"node_id", "epoch"}
    /strata/controller_epoch            -                     {"epoch"}
    /strata/topics/<name>               -                     TopicRegistration
    /strata/partitions/<name>/<index>   -                     PartitionRegistration
    /strata/configs/brokers/<scope>     -                     {"configs": {...}}  ("" = default)
    /strata/shutting_down/<node.id>     leased by the broker  {} (in controlled shutdown: no
                                                              leadership is handed to it)
    /strata/acls/...                    -                     one ACL binding per key
                                                              (``strata.security.acl_store``)
    /strata/client-quotas/<entity>      -                     one quota entity per key
                                                              (``strata.broker.quotas.quota_store``)

Invariants:

* a broker's *epoch* is the store version of its registration (``Entry.version``): a restarted
  ``node.id`` registers again and gets a larger one, so a zombie of the old incarnation is told
  apart (and a partition whose ``leader_broker_epoch`` is not its leader's current epoch was
  led by a dead incarnation and needs an election);
* a partition's ``leader_epoch`` grows whenever its leader changes; its ``partition_epoch``
  grows with every change of its registration (the leader's ISR changes are
  compare-and-set on the key's version);
* ``replicas`` lists the preferred leader first; ``isr`` is never empty (a partition whose
  last in-sync replica died keeps it, with ``leader = -1``: offline); ``adding`` /
  ``removing`` describe a reassignment in progress (KIP-455): ``replicas`` then holds the
  union of the old and new replica sets.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, ParamSpec, TypeVar

from strata.broker.quotas.client_quotas import ClientQuotas
from strata.broker.quotas.quota_store import CLIENT_QUOTAS_PREFIX, decode_all
from strata.security.acl import AclBinding
from strata.security.acl_store import ACLS_PREFIX, decode_binding

ROOT: Final = "/strata/"
BROKERS: Final = ROOT + "brokers/"
CONTROLLER: Final = ROOT + "controller"
CONTROLLER_EPOCH: Final = ROOT + "controller_epoch"
TOPICS: Final = ROOT + "topics/"
PARTITIONS: Final = ROOT + "partitions/"
BROKER_CONFIGS: Final = ROOT + "configs/brokers/"
SHUTTING_DOWN: Final = ROOT + "shutting_down/"

FORMAT_VERSION: Final = 1
NO_LEADER: Final = -1


class ImageFormatError(ValueError):
    """A value in the store that this Strata cannot read (malformed or from a newer Strata)."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _format_errors(decode: Callable[_P, _R]) -> Callable[_P, _R]:
    """``decode`` raising only ``ImageFormatError`` on a malformed or wrongly typed value."""
    @functools.wraps(decode)
    def strict(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return decode(*args, **kwargs)
        except ImageFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImageFormatError(f"{type(exc).__name__}: {exc}") from None
    return strict


def broker_key(node_id: int) -> str:
    return f"{BROKERS}{node_id}"


def topic_key(name: str) -> str:
    return f"{TOPICS}{name}"


def partition_key(topic: str, index: int) -> str:
    return f"{PARTITIONS}{topic}/{index}"


def partitions_prefix(topic: str) -> str:
    return f"{PARTITIONS}{topic}/"


def shutting_down_key(node_id: int) -> str:
    return f"{SHUTTING_DOWN}{node_id}"


def broker_configs_key(scope: str) -> str:
    return f"{BROKER_CONFIGS}{scope}"


# ----------------------------------------------------------------------------- values
@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker: where clients reach it, its rack; ``epoch`` is the entry's version.

    ``endpoints`` are its advertised listeners, ``(name, host, port)`` in ``listeners`` order
    (JSON ``"endpoints": [{"name", "host", "port"}]``); ``host`` / ``port`` stay the first one's,
    so readers that predate listeners keep working. A registration without endpoints (from an
    older Strata) serves every listener name at ``host:port``.
    """

    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = 0
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the named listener; None if this broker has no such listener."""
        if not self.endpoints:
            return self.host, self.port
        return next(((h, p) for name, h, p in self.endpoints if name == listener), None)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"node_id": self.node_id, "host": self.host, "port": self.port,
                               "rack": self.rack}
        if self.endpoints:
            doc["endpoints"] = [{"name": n, "host": h, "port": p} for n, h, p in self.endpoints]
        return _dump(doc)

    @classmethod
    @_format_errors
    def decode(cls, raw: bytes, epoch: int) -> BrokerRegistration:
        doc = _load(raw)
        endpoints = tuple((str(e["name"]), str(e["host"]), int(e["port"]))
                          for e in doc.get("endpoints") or ())
        return cls(int(doc["node_id"]), str(doc["host"]), int(doc["port"]),
                   doc.get("rack") or None, epoch, endpoints)


@dataclass(frozen=True, slots=True)
class TopicRegistration:
    """A topic: its id (stops a broker serving a deleted-and-recreated topic's old data), its
    replication factor as created, its dynamic configs."""

    name: str
    topic_id: uuid.UUID
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dump({"topic_id": str(self.topic_id),
                      "replication_factor": self.replication_factor,
                      "configs": dict(sorted(self.configs.items()))})

    @classmethod
    @_format_errors
    def decode(cls, name: str, raw: bytes) -> TopicRegistration:
        doc = _load(raw)
        configs = doc.get("configs") or {}
        return cls(name, uuid.UUID(doc["topic_id"]), int(doc["replication_factor"]),
                   MappingProxyType({str(k): str(v) for k, v in configs.items()}))


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replicas and leadership (Kafka's ``PartitionRegistration``)."""

    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    leader_broker_epoch: int = 0
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once a reassignment in progress completes."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def with_changes(self, **changes: Any) -> PartitionRegistration:
        """A copy with ``changes`` and the partition epoch bumped (and the leader epoch when
        the leader changed)."""
        leader_changed = "leader" in changes and changes["leader"] != self.leader
        new = replace(self, partition_epoch=self.partition_epoch + 1, **changes)
        if leader_changed and "leader_epoch" not in changes:
            new = replace(new, leader_epoch=self.leader_epoch + 1)
        return new

    def encode(self) -> bytes:
        return _dump({
            "topic_id": str(self.topic_id), "replicas": list(self.replicas),
            "isr": list(self.isr), "leader": self.leader, "leader_epoch": self.leader_epoch,
            "leader_broker_epoch": self.leader_broker_epoch,
            "partition_epoch": self.partition_epoch, "adding": list(self.adding),
            "removing": list(self.removing),
        })

    @classmethod
    @_format_errors
    def decode(cls, raw: bytes) -> PartitionRegistration:
        doc = _load(raw)
        return cls(
            topic_id=uuid.UUID(doc["topic_id"]),
            replicas=tuple(int(r) for r in doc["replicas"]),
            isr=tuple(int(r) for r in doc["isr"]),
            leader=int(doc["leader"]),
            leader_epoch=int(doc["leader_epoch"]),
            leader_broker_epoch=int(doc.get("leader_broker_epoch", 0)),
            partition_epoch=int(doc["partition_epoch"]),
            adding=tuple(int(r) for r in doc.get("adding", ())),
            removing=tuple(int(r) for r in doc.get("removing", ())),
        )


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    node_id: int
    epoch: int

    def encode(self) -> bytes:
        return _dump({"node_id": self.node_id, "epoch": self.epoch})

    @classmethod
    @_format_errors
    def decode(cls, raw: bytes) -> ControllerRegistration:
        doc = _load(raw)
        return cls(int(doc["node_id"]), int(doc["epoch"]))


def encode_epoch(epoch: int) -> bytes:
    return _dump({"epoch": epoch})


@_format_errors
def decode_epoch(raw: bytes) -> int:
    return int(_load(raw)["epoch"])


def encode_configs(configs: Mapping[str, str]) -> bytes:
    return _dump({"configs": dict(sorted(configs.items()))})


@_format_errors
def decode_configs(raw: bytes) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_load(raw).get("configs") or {}).items()}


# ----------------------------------------------------------------------------- the image
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ClusterImage:
    """Everything the store holds, decoded, at ``revision``. Replaced, never mutated.

    ``changed_partitions`` (Kafka's ``MetadataDelta``, as far as partitions go): the
    partitions whose registration or version differs from those of the image at revision
    ``delta_from`` — added, changed or gone; every other partition's registration is that
    image's object. None: unknown (a full build: after a listing, everything may differ).
    Neither takes part in equality: they tell how the image was reached, not what it holds."""

    revision: int = 0
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    controller: ControllerRegistration | None = None
    controller_epoch: int = 0
    controller_epoch_version: int = 0
    topics: Mapping[str, TopicRegistration] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    partition_versions: Mapping[TopicPartition, int] = field(default_factory=dict)
    topic_versions: Mapping[str, int] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    shutting_down: frozenset[int] = frozenset()
    acls: frozenset[AclBinding] = frozenset()  # /strata/acls/ (strata.security.acl_store)
    client_quotas: ClientQuotas = field(default_factory=ClientQuotas)  # /strata/client-quotas/
    changed_partitions: frozenset[TopicPartition] | None = field(default=None, compare=False)
    delta_from: int | None = field(default=None, compare=False)

    def delta_since(self, revision: int | None) -> frozenset[TopicPartition] | None:
        """The partitions that changed since the image at ``revision``, when this image was
        built from exactly that one (else None: compare everything)."""
        if revision is None or self.delta_from != revision:
            return None
        return self.changed_partitions

    def electable(self) -> Mapping[int, BrokerRegistration]:
        """The live brokers that may take leadership (not in controlled shutdown)."""
        if not self.shutting_down:
            return self.brokers
        return {i: b for i, b in self.brokers.items() if i not in self.shutting_down}

    def partition_count(self, topic: str) -> int:
        count = 0
        while (topic, count) in self.partitions:
            count += 1
        return count

    def topic_partitions(self, topic: str) -> list[tuple[int, PartitionRegistration]]:
        return [(i, self.partitions[(topic, i)]) for i in range(self.partition_count(topic))]


DecodeMemo = dict[str, tuple[bytes, int, Any]]
"""Key -> (value, version, decoded) of the last build: ``build_image`` decodes again only the
entries whose value object or version changed (a watch replaces the value of a key it saw)."""


def parse_partition_key(key: str) -> TopicPartition:
    """``(topic, index)`` of a ``/strata/partitions/<topic>/<index>`` key (ValueError when the
    index is not a number)."""
    topic, _, index = key[len(PARTITIONS):].rpartition("/")
    return topic, int(index)


@dataclass(slots=True)
class DecodedEntries:
    """What one pass over some of the store's entries decoded, before the image's one rule
    across entries (``visible_partitions``). A later entry of the same broker or partition
    replaces an earlier one (``entries`` order)."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicRegistration] = field(default_factory=dict)
    topic_versions: dict[str, int] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    partition_versions: dict[TopicPartition, int] = field(default_factory=dict)
    broker_configs: dict[str, Mapping[str, str]] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    controller: ControllerRegistration | None = None
    controller_epoch: int = 0
    controller_epoch_version: int = 0
    acls: set[AclBinding] = field(default_factory=set)
    quota_docs: list[object] = field(default_factory=list)


def decode_entries(entries: Mapping[str, tuple[bytes, int]], memo: DecodeMemo | None,
                   fresh: DecodeMemo) -> DecodedEntries:
    """Decode ``entries`` (key -> (value, version)), skipping those this Strata cannot read.
    A value ``memo`` holds for the same value object and version is not decoded again; every
    decoded value is recorded in ``fresh`` (which may be ``memo`` itself)."""
    def decoded(key: str, value: bytes, version: int, decode: Callable[..., Any],
                *args: Any) -> Any:
        hit = memo.get(key) if memo is not None else None
        fresh_hit = hit is not None and hit[0] is value and hit[1] == version
        result = hit[2] if hit is not None and fresh_hit else decode(*args)
        fresh[key] = (value, version, result)
        return result

    d = DecodedEntries()
    for key, (value, version) in entries.items():
        try:
            if key.startswith(PARTITIONS):
                tp = parse_partition_key(key)
                d.partitions[tp] = decoded(key, value, version, PartitionRegistration.decode,
                                           value)
                d.partition_versions[tp] = version
            elif key.startswith(BROKERS):
                broker = decoded(key, value, version, BrokerRegistration.decode, value, version)
                d.brokers[broker.node_id] = broker
            elif key == CONTROLLER:
                d.controller = ControllerRegistration.decode(value)
            elif key == CONTROLLER_EPOCH:
                d.controller_epoch, d.controller_epoch_version = decode_epoch(value), version
            elif key.startswith(TOPICS):
                name = key[len(TOPICS):]
                d.topics[name] = decoded(key, value, version, TopicRegistration.decode, name,
                                         value)
                d.topic_versions[name] = version
            elif key.startswith(SHUTTING_DOWN):
                d.shutting_down.add(int(key[len(SHUTTING_DOWN):]))
            elif key.startswith(BROKER_CONFIGS):
                d.broker_configs[key[len(BROKER_CONFIGS):]] = decoded(
                    key, value, version, _decode_broker_configs, value)
            elif key.startswith(ACLS_PREFIX):
                d.acls.add(decoded(key, value, version, _decode_acl, value))
            elif key.startswith(CLIENT_QUOTAS_PREFIX):
                d.quota_docs.append(decoded(key, value, version, json.loads, value))
        except (ImageFormatError, ValueError, KeyError, TypeError):
            # A value this Strata cannot read (malformed, wrongly typed, or from a newer
            # Strata) is left out of the image, never fatal to the broker reading it.
            continue
    return d


def visible_partitions(partitions: Mapping[TopicPartition, PartitionRegistration],
                       topics: Mapping[str, TopicRegistration]
                       ) -> dict[TopicPartition, PartitionRegistration]:
    """The partitions that are part of the image: those of a topic in ``topics`` under its
    topic id (a deleted topic's partitions, or an older incarnation's, are left out)."""
    return {tp: p for tp, p in partitions.items()
            if tp[0] in topics and p.topic_id == topics[tp[0]].topic_id}


def build_image(entries: Mapping[str, tuple[bytes, int]], revision: int,
                previous: ClusterImage | None = None,
                memo: DecodeMemo | None = None) -> ClusterImage:
    """The image of the store's ``entries`` (key -> (value, version)); entries this Strata
    cannot read are skipped, never fatal to the broker (they are logged by the cache).

    With ``memo`` (the caller's, updated to ``entries``), unchanged entries are not decoded
    again; with ``previous``, each of its mappings that came out equal is reused as is, so
    a listener can tell "unchanged" by identity (an ISR change among 10,000 partitions leaves
    the topics and configs objects alone). The full build: ``image_delta.ImageBuilder``
    builds the next image from the keys that changed, to the same result."""
    fresh: DecodeMemo = {}
    d = decode_entries(entries, memo, fresh)
    if memo is not None:
        memo.clear()
        memo.update(fresh)
    partitions = visible_partitions(d.partitions, d.topics)
    kept_versions = {tp: d.partition_versions[tp] for tp in partitions}
    was = previous if previous is not None else ClusterImage()
    frozen_acls = frozenset(d.acls)
    return ClusterImage(
        revision, _same(was.brokers, d.brokers), d.controller, d.controller_epoch,
        d.controller_epoch_version, _same(was.topics, d.topics),
        _same(was.partitions, partitions), _same(was.partition_versions, kept_versions),
        _same(was.topic_versions, d.topic_versions), _same(was.broker_configs, d.broker_configs),
        frozenset(d.shutting_down), was.acls if was.acls == frozen_acls else frozen_acls,
        decode_all(d.quota_docs))


def _decode_broker_configs(raw: bytes) -> Mapping[str, str]:
    return MappingProxyType(decode_configs(raw))


def _decode_acl(raw: bytes) -> AclBinding:
    return decode_binding(json.loads(raw))


def _same(previous: Mapping[Any, Any], current: dict[Any, Any]) -> Mapping[Any, Any]:
    """``previous`` itself when it holds what ``current`` holds, else ``current`` frozen."""
    if isinstance(previous, MappingProxyType) and previous == current:
        return previous
    return MappingProxyType(current)


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps({"v": FORMAT_VERSION, **doc}, separators=(",", ":")).encode()


def _load(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImageFormatError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ImageFormatError("not a JSON object")
    version = doc.get("v", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ImageFormatError(f"format version {version!r}; this Strata reads up to "
                               f"{FORMAT_VERSION}")
    return doc
