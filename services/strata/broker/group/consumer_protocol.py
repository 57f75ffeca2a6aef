"""The embedded consumer protocol of classic groups: ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment``, the bytes a consumer puts in JoinGroup and SyncGroup.

Kafka's ``ConsumerProtocol`` (``clients/.../consumer/internals/ConsumerProtocol.java``), which
the broker reads when a classic member is part of a consumer group (online migration,
KIP-848): its subscription from its JoinGroup metadata, its assignment written into its
SyncGroup answer. Both start with an ``int16`` version and are Kafka's non-flexible encoding
(``string`` = ``int16 length``, ``bytes`` = ``int32 length``, -1 = null; arrays ``int32``
count)::

    Subscription v0  topics [string], userData bytes?
                 v1  + ownedPartitions [topic string, partitions [int32]]
                 v2  + generationId int32 (default -1)
                 v3  + rackId string?
    Assignment   v0+ assignedPartitions [topic string, partitions [int32]], userData bytes?

A newer version than 3 is read as version 3 (its extra fields ignored, as Kafka does).
Pure; ``ConsumerProtocolError`` for bytes that do not parse.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from strata.protocol.byte_reader import ByteReader

LATEST_VERSION: Final = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(Exception):
    """Embedded consumer protocol bytes that do not parse (Kafka's ``SchemaException``)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    partitions: tuple[tuple[str, int], ...] = ()
    user_data: bytes | None = None
    version: int = 0


def _topic_partitions_of(reader: ByteReader) -> tuple[tuple[str, int], ...]:
    pairs: list[tuple[str, int]] = []
    for _ in range(reader.array_length()):
        topic = reader.nullable_string() or ""
        pairs.extend((topic, reader.int32()) for _ in range(reader.array_length()))
    return tuple(pairs)


def version_of(data: bytes) -> int:
    """The version an embedded protocol message starts with."""
    if len(data) < 2:
        raise ConsumerProtocolError("embedded consumer protocol bytes are too short")
    version = int(_I16.unpack_from(data)[0])
    if version < 0:
        raise ConsumerProtocolError(f"version {version} is negative")
    return version


def decode_subscription(data: bytes) -> Subscription:
    reader = ByteReader(data, ConsumerProtocolError)
    version = version_of(data)
    reader.int16()
    topics = tuple(reader.nullable_string() or "" for _ in range(reader.array_length()))
    user_data = reader.nullable_bytes()
    owned: tuple[tuple[str, int], ...] = ()
    generation = -1
    rack: str | None = None
    if version >= 1 and not reader.at_end:
        owned = _topic_partitions_of(reader)
    if version >= 2 and not reader.at_end:
        generation = reader.int32()
    if version >= 3 and not reader.at_end:
        rack = reader.nullable_string()
    return Subscription(topics, user_data, owned, generation, rack, version)


def encode_subscription(topics: Iterable[str], *, owned: Iterable[tuple[str, int]] = (),
                        generation_id: int = -1, rack_id: str | None = None,
                        version: int = LATEST_VERSION) -> bytes:
    """A ``ConsumerProtocolSubscription`` (tests, and what clients send)."""
    version = min(version, LATEST_VERSION)
    out = bytearray(_I16.pack(version))
    names = list(topics)
    out += _I32.pack(len(names))
    for name in names:
        _string(out, name)
    out += _I32.pack(-1)  # userData: null
    if version >= 1:
        _topic_partitions(out, owned)
    if version >= 2:
        out += _I32.pack(generation_id)
    if version >= 3:
        _string(out, rack_id)
    return bytes(out)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    reader = ByteReader(data, ConsumerProtocolError)
    version = version_of(data)
    reader.int16()
    partitions = _topic_partitions_of(reader)
    user_data = None if reader.at_end else reader.nullable_bytes()
    return ConsumerAssignment(partitions, user_data, version)


def encode_assignment(partitions: Mapping[str, Iterable[int]] | Iterable[tuple[str, int]],
                      version: int = LATEST_VERSION) -> bytes:
    """A ``ConsumerProtocolAssignment`` of ``partitions`` (topic -> indexes, or pairs) at
    ``version`` (at most the latest; every version has the same layout), no user data."""
    pairs = ([(t, p) for t, parts in partitions.items() for p in parts]
             if isinstance(partitions, Mapping) else list(partitions))
    out = bytearray(_I16.pack(max(0, min(version, LATEST_VERSION))))
    _topic_partitions(out, pairs)
    out += _I32.pack(-1)
    return bytes(out)


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode()
    out += _I16.pack(len(raw)) + raw


def _topic_partitions(out: bytearray, pairs: Iterable[tuple[str, int]]) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, index in pairs:
        by_topic.setdefault(topic, []).append(index)
    out += _I32.pack(len(by_topic))
    for topic in sorted(by_topic):
        _string(out, topic)
        indexes = sorted(by_topic[topic])
        out += _I32.pack(len(indexes))
        for index in indexes:
            out += _I32.pack(index)
