"""``ImageBuilder``: the next ``ClusterImage`` from the previous one and the keys that changed.

Kafka's ``MetadataDelta`` applied to a ``MetadataImage``. Pure (no I/O). Owns the store's
entries under ``ROOT`` as the ``MetadataCache`` follows them (``put`` / ``delete`` in watch
order), their decoded values, two indexes over them — the partition keys of each topic, and
the few entries that are neither topics nor partitions (brokers, controller, broker configs,
shutting_down, ACLs, client quotas) — and the image last built from them.

``build`` makes the next image in work proportional to what changed since the last one, where
``build_image`` (``load``) goes over every entry:

* only the changed entries are decoded;
* the partitions mapping is copied (one dict copy, in C) and only the changed partitions are
  written into it; a topic that appeared, went or changed id (deleted and recreated) brings
  its own partitions into or out of view — its own only;
* a change among the few other entries builds their part of the image from them alone;
* a mapping nothing changed is the previous image's object, and so is each registration that
  did not change (listeners skip work on identity);
* the image records ``changed_partitions`` relative to its predecessor (``delta_from``).

Invariant (``tests/unit/broker/test_image_builder.py`` checks it after every step of random
sequences of puts and deletes): the image holds what ``build_image`` of the same entries
holds, reuses the previous image's mappings exactly when they came out equal, and
``changed_partitions`` is exactly the set of partitions whose registration or version
differs from the previous image's. Mappings may iterate in another order.

One exception: a partition key whose index is not written as ``str(int)`` (``.../07``) could
name the same partition as another key; while one is present every image is a full
``build_image``, which settles such a tie by the order of the entries. Used by one task (the
cache's).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from strata.broker.cluster.image import (
    PARTITIONS,
    TOPICS,
    ClusterImage,
    DecodeMemo,
    PartitionRegistration,
    TopicPartition,
    TopicRegistration,
    build_image,
    decode_entries,
    parse_partition_key,
    topic_key,
    visible_partitions,
)

_K = TypeVar("_K")
_V = TypeVar("_V")

Entries = dict[str, tuple[bytes, int]]


class ImageBuilder:
    def __init__(self) -> None:
        self.image = ClusterImage()
        self._entries: Entries = {}
        self._memo: DecodeMemo = {}  # every entry's decoded value, as of its value and version
        self._topic_keys: dict[str, dict[str, None]] = {}  # topic -> its partition keys
        self._others: Entries = {}  # neither topic nor partition, in the store's key order
        self._others_memo: DecodeMemo = {}
        self._aliases: set[str] = set()  # partition keys with a non-canonical index
        self._changed: dict[str, None] = {}  # keys put or deleted since the last image

    @property
    def entries(self) -> Mapping[str, tuple[bytes, int]]:
        return self._entries

    def load(self, entries: Mapping[str, tuple[bytes, int]], revision: int) -> ClusterImage:
        """The image of a listing of the whole store (a full ``build_image``, which tells no
        delta: ``changed_partitions`` is None)."""
        self._entries = dict(entries)
        self._topic_keys, self._others, self._aliases, self._changed = {}, {}, set(), {}
        for key, entry in self._entries.items():
            self._index(key, entry)
        self.image = build_image(self._entries, revision, self.image, self._memo)
        return self.image

    def put(self, key: str, value: bytes, version: int) -> None:
        self._entries[key] = (value, version)
        self._index(key, (value, version))
        self._changed[key] = None

    def delete(self, key: str) -> None:
        if self._entries.pop(key, None) is None:
            return
        self._memo.pop(key, None)
        if key.startswith(PARTITIONS):
            topic = key[len(PARTITIONS):].rpartition("/")[0]
            keys = self._topic_keys.get(topic)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._topic_keys[topic]
            self._aliases.discard(key)
        elif not key.startswith(TOPICS):
            self._others.pop(key, None)
        self._changed[key] = None

    def build(self, revision: int) -> ClusterImage:
        """The image at ``revision`` of the entries as ``put`` / ``delete`` left them."""
        changed, self._changed = self._changed, {}
        if self._aliases:
            self.image = build_image(self._entries, revision, self.image, self._memo)
            return self.image
        was = self.image
        topic_names: list[str] = []
        partition_keys: list[str] = []
        others_changed = False
        for key in changed:
            if key.startswith(PARTITIONS):
                partition_keys.append(key)
            elif key.startswith(TOPICS):
                topic_names.append(key[len(TOPICS):])
            else:
                others_changed = True
        next_topics, topic_versions, moved = self._next_topics(was, topic_names)
        topics = next_topics.result()
        updates = self._partition_updates(topics, moved, partition_keys)
        partitions = _CopyOnWrite(was.partitions)
        versions = _CopyOnWrite(was.partition_versions)
        changed_partitions = set()
        for tp, update in updates.items():
            registration, version = update if update is not None else (None, None)
            if partitions.set(tp, registration) | versions.set(tp, version):
                changed_partitions.add(tp)
        # The others are few: their part of the image is built from them alone, by the very
        # code of the full build (identity reused where equal, as there).
        others = (build_image(self._others, revision, was, self._others_memo)
                  if others_changed else was)
        self.image = ClusterImage(
            revision=revision, brokers=others.brokers, controller=others.controller,
            controller_epoch=others.controller_epoch,
            controller_epoch_version=others.controller_epoch_version,
            topics=topics, partitions=partitions.result(),
            partition_versions=versions.result(), topic_versions=topic_versions.result(),
            broker_configs=others.broker_configs, shutting_down=others.shutting_down,
            acls=others.acls, client_quotas=others.client_quotas,
            changed_partitions=frozenset(changed_partitions), delta_from=was.revision)
        return self.image

    def _index(self, key: str, entry: tuple[bytes, int]) -> None:
        if key.startswith(PARTITIONS):
            topic, _, index = key[len(PARTITIONS):].rpartition("/")
            self._topic_keys.setdefault(topic, {})[key] = None
            if not _canonical(index):
                self._aliases.add(key)
        elif not key.startswith(TOPICS):
            self._others[key] = entry

    def _next_topics(self, was: ClusterImage, names: list[str]
                     ) -> tuple[_CopyOnWrite[str, TopicRegistration], _CopyOnWrite[str, int],
                                list[str]]:
        """The topics and their versions after the changed topic keys ``names``, and the
        topics whose partitions come into or go out of view (appeared, gone, or a new id)."""
        topics = _CopyOnWrite(was.topics)
        versions = _CopyOnWrite(was.topic_versions)
        if not names:
            return topics, versions, []
        keys = (topic_key(name) for name in names)
        d = decode_entries({k: self._entries[k] for k in keys if k in self._entries},
                           self._memo, self._memo)
        moved = []
        for name in names:
            old, new = was.topics.get(name), d.topics.get(name)
            topics.set(name, new)
            versions.set(name, d.topic_versions.get(name))
            if (None if old is None else old.topic_id) != (None if new is None else new.topic_id):
                moved.append(name)
        return topics, versions, moved

    def _partition_updates(self, topics: Mapping[str, TopicRegistration], moved: list[str],
                           keys: list[str]
                           ) -> dict[TopicPartition, tuple[PartitionRegistration, int] | None]:
        """Each partition that may have changed -> its registration and version in the next
        image (None: not in it): those of the changed keys, and every partition of a topic
        that came into or went out of view."""
        wanted = dict.fromkeys(keys)
        for name in moved:
            wanted.update(self._topic_keys.get(name, {}))
        candidates = []
        for key in wanted:
            try:
                candidates.append(parse_partition_key(key))
            except ValueError:  # never part of any image
                continue
        entries = self._entries
        d = decode_entries({k: entries[k] for k in wanted if k in entries}, self._memo,
                           self._memo)
        visible = visible_partitions(d.partitions, topics)
        return {tp: (visible[tp], d.partition_versions[tp]) if tp in visible else None
                for tp in candidates}


class _CopyOnWrite(Generic[_K, _V]):
    """The next version of one of the image's mappings: the previous object until a value
    really changes, then a copy of it (one dict copy, in C) holding the changes."""

    def __init__(self, base: Mapping[_K, _V]) -> None:
        self._base = base
        self._copy: dict[_K, _V] | None = None

    def set(self, key: _K, value: _V | None) -> bool:
        """``key`` now maps to ``value`` (None: absent); True when that is a change."""
        if self._base.get(key) == value:
            return False
        if self._copy is None:
            base = self._base
            self._copy = base.copy() if isinstance(base, (dict, MappingProxyType)) else dict(base)
        if value is None:
            self._copy.pop(key, None)
        else:
            self._copy[key] = value
        return True

    def result(self) -> Mapping[_K, _V]:
        if self._copy is not None:
            return MappingProxyType(self._copy)
        if isinstance(self._base, MappingProxyType):
            return self._base
        return MappingProxyType(dict(self._base))


def _canonical(index: str) -> bool:
    try:
        return str(int(index)) == index
    except ValueError:
        return True  # not a number: the key is skipped, it names no partition
