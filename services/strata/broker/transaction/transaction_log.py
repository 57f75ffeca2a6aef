"""The records of ``__transaction_state``: Kafka's key and value formats, byte for byte.

One record per transactional id change, compacted by key; a null value is a tombstone (the id
expired). Integers are big-endian; ``string`` is ``int16 length + UTF-8``; ``[]`` is an
``int32`` count (-1 = null). Value v1 is Kafka's flexible encoding (KIP-482): compact strings
and arrays (unsigned varint length + 1, 0 = null), a tagged-field section (unsigned varint
count, then per field: tag, size, bytes; tags ascending) after every struct. Grammar, from
Kafka's ``TransactionLogKey.json`` / ``TransactionLogValue.json``::

    key    (coordinator record type 0, version 0):
        int16 0, TransactionalId string

    value  v0 (transaction.version 0):  int16 0, then
        ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
        TransactionStatus int8 (TransactionState id),
        TransactionPartitions [Topic string, PartitionIds [int32]] (null when Empty),
        TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
    value  v1 (transaction.version 1+): int16 1, the same fields, compact and tagged, then tags
        0 PreviousProducerId int64 (default -1), 1 NextProducerId int64 (default -1),
        2 ClientTransactionVersion int16 (default 0) -- written only when not the default

The partitions are written grouped by topic, topics and partitions sorted (Kafka's order is a
hash set's; any order reads back the same). Strata writes PreviousProducerId and NextProducerId
(Kafka's 4.x writer leaves them at their defaults): a coordinator that takes over a transaction
ending on an exhausted epoch then still knows the producer id it rotates to. Readers of either
kind read both. The last producer epoch is not in the record: a loaded id has none (-1).

A transactional id's partition is ``strata.broker.coordinator_partition.partition_for``.
``transaction_topic_configs`` are the topic configs Kafka enforces on the topic. Pure functions
over bytes; ``TransactionLogError`` for bytes that do not parse.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from strata.broker.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
)
from strata.broker.transaction.transaction_state import TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.byte_reader import ByteReader
from strata.protocol.primitives import write_uvarint

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
TRANSACTION_LOG_KEY_TYPE: Final = 0  # CoordinatorRecordType.TRANSACTION_LOG
MAX_VALUE_VERSION: Final = 1
ENFORCED_REQUIRED_ACKS: Final = -1

_TAG_PREVIOUS_PRODUCER_ID: Final = 0
_TAG_NEXT_PRODUCER_ID: Final = 1
_TAG_CLIENT_TRANSACTION_VERSION: Final = 2

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TransactionLogError(ValueError):
    """A ``__transaction_state`` key or value that does not parse."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A decoded value (Kafka's ``TransactionLogValue``)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        """The metadata a coordinator loads from this record (partitions only if not Empty)."""
        return TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=self.producer_id,
            prev_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=self.transaction_timeout_ms,
            state=self.transaction_state,
            topic_partitions=(set() if self.transaction_state is TransactionState.EMPTY
                              else set(self.partitions)),
            txn_start_timestamp=self.start_timestamp_ms,
            txn_last_update_timestamp=self.last_update_timestamp_ms,
            client_transaction_version=TransactionVersion.from_feature_level(
                self.client_transaction_version),
        )


# ---------------------------------------------------------------------------- partitioning


def transaction_topic_configs(min_insync_replicas: int, segment_bytes: int) -> Mapping[str, str]:
    """Kafka's enforced topic configs of ``__transaction_state`` (compacted, uncompressed, no
    unclean election)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(min_insync_replicas),
        "segment.bytes": str(segment_bytes),
    }


# ---------------------------------------------------------------------------- writing


def key_to_bytes(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return _I16.pack(TRANSACTION_LOG_KEY_TYPE) + _I16.pack(len(data)) + data


def value_to_bytes(transit: TxnTransitMetadata, transaction_version_level: TransactionVersion,
                   ) -> bytes:
    """The record value of a transit, at the value version of the broker's
    ``transaction.version``."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction has no partitions: {transit}")
    version = transaction_version_level.transaction_log_value_version
    topics: dict[str, list[int]] | None = None
    if transit.txn_state is not TransactionState.EMPTY:
        topics = {}
        for topic, partition in sorted(transit.topic_partitions):
            topics.setdefault(topic, []).append(partition)
    out = bytearray(_I16.pack(version))
    out += _I64.pack(transit.producer_id)
    out += _I16.pack(transit.producer_epoch)
    out += _I32.pack(transit.txn_timeout_ms)
    out += _I8.pack(transit.txn_state.id)
    if version == 0:
        if topics is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(topics))
            for topic, partitions in topics.items():
                data = topic.encode()
                out += _I16.pack(len(data)) + data + _I32.pack(len(partitions))
                out += b"".join(_I32.pack(p) for p in partitions)
    elif topics is None:
        out += write_uvarint(0)
    else:
        out += write_uvarint(len(topics) + 1)
        for topic, partitions in topics.items():
            data = topic.encode()
            out += write_uvarint(len(data) + 1) + data + write_uvarint(len(partitions) + 1)
            out += b"".join(_I32.pack(p) for p in partitions)
            out += write_uvarint(0)  # the partitions struct's tagged fields
    out += _I64.pack(transit.txn_last_update_timestamp)
    out += _I64.pack(transit.txn_start_timestamp)
    if version >= 1:
        tags: list[tuple[int, bytes]] = []
        if transit.prev_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(transit.prev_producer_id)))
        if transit.next_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(transit.next_producer_id)))
        if transit.client_transaction_version != 0:
            tags.append((_TAG_CLIENT_TRANSACTION_VERSION,
                         _I16.pack(int(transit.client_transaction_version))))
        out += write_uvarint(len(tags))
        for tag, payload in tags:
            out += write_uvarint(tag) + write_uvarint(len(payload)) + payload
    return bytes(out)


# ---------------------------------------------------------------------------- reading


def read_key(key: bytes) -> str | int:
    """The transactional id of a record key; an ``int`` (the key's type) for a key of another
    coordinator record type, which loaders skip as Kafka does."""
    reader = ByteReader(bytes(key), TransactionLogError)
    key_type = reader.int16()
    if key_type != TRANSACTION_LOG_KEY_TYPE:
        return key_type
    transactional_id = reader.string()
    if reader.pos != len(reader.data):
        raise TransactionLogError(f"{len(reader.data) - reader.pos} bytes after the key")
    return transactional_id


def read_value(value: bytes | None) -> TransactionLogValue | None:
    """A record value; None for a tombstone."""
    if value is None:
        return None
    reader = ByteReader(bytes(value), TransactionLogError)
    version = reader.int16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise TransactionLogError(f"unknown transaction log value version {version}")
    reader.compact = version >= 1
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    timeout_ms = reader.int32()
    try:
        state = TransactionState.from_id(reader.int8())
    except ValueError as exc:
        raise TransactionLogError(str(exc)) from None
    partitions: set[TopicPartition] = set()
    for _ in range(reader.array_length()):
        topic = reader.string()
        partition_count = reader.nullable_array_length()
        if partition_count < 0:
            raise TransactionLogError(f"null partition list for topic {topic!r}")
        partitions.update((topic, reader.int32()) for _ in range(partition_count))
        reader.tagged_fields()
    last_update = reader.int64()
    start = reader.int64()
    tags = reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise TransactionLogError(f"{len(reader.data) - reader.pos} bytes after the value")
    return TransactionLogValue(
        producer_id=producer_id, producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms, transaction_state=state,
        partitions=frozenset(partitions), last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=_tag_int(tags, _TAG_PREVIOUS_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        next_producer_id=_tag_int(tags, _TAG_NEXT_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        client_transaction_version=_tag_int(tags, _TAG_CLIENT_TRANSACTION_VERSION, _I16, 0),
    )


def _tag_int(tags: Mapping[int, bytes], tag: int, fmt: struct.Struct, default: int) -> int:
    payload = tags.get(tag)
    if payload is None:
        return default
    if len(payload) != fmt.size:
        raise TransactionLogError(f"tagged field {tag} has {len(payload)} bytes")
    return int(fmt.unpack(payload)[0])
