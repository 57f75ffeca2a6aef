"""Transactions over the Kafka protocol: what Kafka's ``Admin`` offers for them (KIP-664).

Owns the requests Strata's tools (``strata transactions``, the admin API's
``/v1/transactions``) send about transactions, which librdkafka has no call for, each to the
broker Kafka's admin client sends it to, and their answers as plain values:

* ``list_transactions``: ListTransactions v1 to every broker of the cluster (each lists the
  transactional ids it coordinates), filtered by state, producer id and duration;
* ``describe_transactions``: FindCoordinator (key type TRANSACTION) then
  DescribeTransactions v0 to each id's coordinator;
* ``describe_producers``: DescribeProducers v0 to the partition's leader (or to the broker
  named, to see one replica's state);
* ``abort_spec`` / ``abort_transaction``: Kafka's ``abortTransaction``: the producer whose
  current transaction starts at the given offset (DescribeProducers), then WriteTxnMarkers v1
  ABORT with its producer id, epoch and coordinator epoch to the partition's leader;
* ``find_hanging``: ``kafka-transactions.sh find-hanging``'s search: the open transactions
  of the partitions (of a topic, or hosted by a broker) older than the maximum transaction
  timeout whose producer id no coordinator lists, or whose coordinator does not count the
  partition in the transaction (then no marker will ever close it).

Where: the cluster's brokers and partition leaders come from a Metadata v12 request to the
first bootstrap broker that answers (``bootstrap_request``); the others go over one
``BrokerClient`` per broker, closed when the call ends. Every request is bounded by
``target.timeout_s`` (ListTransactions answered COORDINATOR_LOAD_IN_PROGRESS is asked again
within it, as Kafka's admin client retries it). Failures are ``KafkaClientError``: a
broker's error code by Kafka's name with the broker's message and the subject; a broker that
cannot be reached is the unreachable ``_TRANSPORT`` error.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from strata.client.bootstrap_request import bootstrap_request
from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.client_quotas import QuotaTarget
from strata.client.kafka_errors import KafkaClientError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name
from strata.protocol.errors import MessageBuildError

Target = QuotaTarget
_COORDINATOR_LOAD_IN_PROGRESS: Final = 14
_LOAD_RETRY_S: Final = 0.1
"""Where and how to ask: the bootstrap list, the login, the bound, the client id."""

TRANSACTION_KEY_TYPE: Final = 1  # FindCoordinator's key type of a transactional id
NO_VALUE: Final = -1
ZERO_UUID: Final = uuid.UUID(int=0)
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS: Final = 15 * 60 * 1000  # kafka-transactions.sh's 15 min
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One row of ListTransactions, with the broker that coordinates the id."""

    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions of one id; ``transaction_start_time_ms`` None when no transaction
    is open (Kafka answers -1)."""

    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers); -1 for "none" as Kafka sends
    it (``coordinator_epoch`` before a first marker, ``current_txn_start_offset`` outside a
    transaction)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A transaction open on one partition (what ``find_hanging`` reports)."""

    topic: str
    partition: int
    producer: ProducerState


@dataclass(frozen=True, slots=True)
class AbortSpec:
    """The transaction to abort on one partition (Kafka's ``AbortTransactionSpec``)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(slots=True)
class ClusterView:
    """The brokers and, per partition, its leader and replicas (Metadata)."""

    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    partitions: dict[TopicPartition, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    topic_errors: dict[str, tuple[int, str | None]] = field(default_factory=dict)


def _refused(code: int, message: str | None, subject: str, api: str) -> KafkaClientError:
    name = kafka_error_name(code)
    return KafkaClientError(name, message or name.lower().replace("_", " "), subject=subject,
                            api=api)


def _unencodable(exc: MessageBuildError) -> KafkaClientError:
    return KafkaClientError("INVALID_REQUEST", f"the request cannot be encoded: {exc}",
                            subject="")


async def _bootstrap(target: Target, api_key: int, version: int,
                     fields: Mapping[str, Any]) -> Any:
    try:
        return await bootstrap_request(target.bootstrap, target.security, target.timeout_s,
                                       target.client_id, api_key, version, fields)
    except MessageBuildError as exc:
        raise _unencodable(exc) from None


class _Session:
    """One call's connections: the bootstrap Metadata, then a ``BrokerClient`` per broker."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.view = ClusterView()
        self._clients: dict[int, BrokerClient] = {}

    async def __aenter__(self) -> _Session:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def metadata(self, topics: Sequence[str] | None) -> ClusterView:
        """Metadata for ``topics`` (None: every topic, internal ones included)."""
        target = self.target
        response = await _bootstrap(
            target, ApiKey.METADATA, 12,
            {"topics": None if topics is None else [{"name": t, "topic_id": ZERO_UUID}
                                                     for t in topics],
             "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": False})
        view = ClusterView()
        view.brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        for topic in response.topics:
            if int(topic.error_code):
                view.topic_errors[str(topic.name)] = (int(topic.error_code), None)
                continue
            for p in topic.partitions:
                view.partitions[(str(topic.name), int(p.partition_index))] = (
                    int(p.leader_id), tuple(int(r) for r in p.replica_nodes))
        self.view = view
        return view

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader, or the error Kafka's admin client reports for it."""
        error = self.view.topic_errors.get(topic)
        if error is not None and kafka_error_name(error[0]) == "UNKNOWN_TOPIC_OR_PARTITION":
            raise KafkaClientError.unknown_topic(topic)
        if error is not None:
            raise _refused(error[0], None, f"topic {topic!r}", "Metadata")
        found = self.view.partitions.get((topic, partition))
        if found is None:
            raise KafkaClientError("UNKNOWN_TOPIC_OR_PARTITION",
                                   f"partition {topic}-{partition} does not exist", subject="",
                                   api="Metadata")
        if found[0] < 0:
            raise KafkaClientError("LEADER_NOT_AVAILABLE",
                                   f"partition {topic}-{partition} has no leader", subject="",
                                   api="Metadata")
        return found[0]

    async def send(self, node_id: int, api_key: int, version: int,
                   fields: Mapping[str, Any]) -> Any:
        address = self.view.brokers.get(node_id)
        if address is None:
            raise KafkaClientError("BROKER_NOT_AVAILABLE", f"broker {node_id} is not in the "
                                   "cluster's metadata", subject="", api="Metadata")
        client = self._clients.get(node_id)
        if client is None:
            target = self.target
            client = self._clients[node_id] = BrokerClient(
                address[0], address[1], client_id=target.client_id,
                request_timeout_s=target.timeout_s, connect_timeout_s=target.timeout_s,
                security=target.security)
        try:
            return await client.request(api_key, version, fields)
        except MessageBuildError as exc:  # a value the protocol cannot carry (a huge id)
            raise _unencodable(exc) from None
        except BrokerUnavailableError as exc:
            raise KafkaClientError("_TRANSPORT", str(exc), subject=f"broker {node_id}",
                                   unreachable=True, reason=str(exc),
                                   bootstrap=f"{address[0]}:{address[1]}",
                                   timeout_s=self.target.timeout_s) from None


# ------------------------------------------------------------------------------------- list
async def list_transactions(target: Target, *, states: Iterable[str] = (),
                            producer_ids: Iterable[int] = (),
                            duration_ms: int = NO_VALUE) -> list[TransactionListing]:
    """Every transactional id the cluster's coordinators list (ListTransactions to each
    broker), sorted by id; ``duration_ms`` >= 0: only transactions open longer than that."""
    async with _Session(target) as session:
        view = await session.metadata([])
        return await _list(session, sorted(view.brokers), list(states), list(producer_ids),
                           duration_ms)


async def _list(session: _Session, nodes: Sequence[int], states: list[str],
                producer_ids: list[int], duration_ms: int) -> list[TransactionListing]:
    listed: list[TransactionListing] = []
    for node in nodes:
        deadline = time.monotonic() + session.target.timeout_s
        while True:  # a coordinator still loading is asked again, as Kafka's admin client does
            response = await session.send(node, ApiKey.LIST_TRANSACTIONS, 1, {
                "state_filters": states, "producer_id_filters": producer_ids,
                "duration_filter": duration_ms})
            if (int(response.error_code) != _COORDINATOR_LOAD_IN_PROGRESS
                    or time.monotonic() > deadline):
                break
            await asyncio.sleep(_LOAD_RETRY_S)
        if int(response.error_code):
            raise _refused(int(response.error_code), None, f"broker {node}",
                           "ListTransactions")
        if response.unknown_state_filters:
            raise KafkaClientError("INVALID_REQUEST", "unknown transaction state(s): "
                                   + ", ".join(response.unknown_state_filters),
                                   subject="", api="ListTransactions")
        listed += [TransactionListing(str(t.transactional_id), node, int(t.producer_id),
                                      str(t.transaction_state))
                   for t in response.transaction_states]
    return sorted(listed, key=lambda t: (t.transactional_id, t.coordinator_id))


# --------------------------------------------------------------------------------- describe
async def describe_transactions(target: Target, transactional_ids: Sequence[str]
                                ) -> dict[str, TransactionDescription | None]:
    """Each id's transaction from its coordinator; None for an id no coordinator knows
    (TRANSACTIONAL_ID_NOT_FOUND)."""
    async with _Session(target) as session:
        await session.metadata([])
        return await _describe(session, transactional_ids)


async def describe_transaction(target: Target, transactional_id: str) -> TransactionDescription:
    """One id's transaction; TRANSACTIONAL_ID_NOT_FOUND as a ``KafkaClientError``."""
    found = (await describe_transactions(target, [transactional_id]))[transactional_id]
    if found is None:
        raise KafkaClientError("TRANSACTIONAL_ID_NOT_FOUND",
                               f"no coordinator knows transactional id {transactional_id!r}",
                               subject="", api="DescribeTransactions")
    return found


async def _describe(session: _Session, transactional_ids: Sequence[str]
                    ) -> dict[str, TransactionDescription | None]:
    out: dict[str, TransactionDescription | None] = {}
    if not transactional_ids:
        return out
    target = session.target
    found = await _bootstrap(
        target, ApiKey.FIND_COORDINATOR, 4,
        {"key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": list(transactional_ids)})
    by_node: dict[int, list[str]] = {}
    for coordinator in found.coordinators:
        if int(coordinator.error_code):
            raise _refused(int(coordinator.error_code), coordinator.error_message,
                           f"transactional id {coordinator.key!r}", "FindCoordinator")
        session.view.brokers.setdefault(int(coordinator.node_id),
                                        (coordinator.host, int(coordinator.port)))
        by_node.setdefault(int(coordinator.node_id), []).append(str(coordinator.key))
    for node, ids in sorted(by_node.items()):
        response = await session.send(node, ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                      {"transactional_ids": ids})
        for state in response.transaction_states:
            tid = str(state.transactional_id)
            code = int(state.error_code)
            if kafka_error_name(code) == "TRANSACTIONAL_ID_NOT_FOUND":
                out[tid] = None
                continue
            if code:
                raise _refused(code, None, f"transactional id {tid!r}",
                               "DescribeTransactions")
            start = _millis(state.transaction_start_time)
            out[tid] = TransactionDescription(
                node, tid, int(state.producer_id), int(state.producer_epoch),
                str(state.transaction_state), _millis(state.transaction_timeout),
                start if start > 0 else None,
                tuple(sorted((str(t.topic), int(p)) for t in state.topics
                             for p in t.partitions)))
    return out


def _millis(value: Any) -> int:
    """kio gives durations and timestamps as ``timedelta`` / ``datetime``; Kafka's ms."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


# -------------------------------------------------------------------------------- producers
async def describe_producers(target: Target, topic: str, partition: int,
                             broker_id: int | None = None) -> list[ProducerState]:
    """The partition's active producers, from its leader (or from replica ``broker_id``)."""
    async with _Session(target) as session:
        await session.metadata([topic])
        node = broker_id if broker_id is not None else session.leader(topic, partition)
        found = await _producers(session, node, [(topic, partition)])
        return found[(topic, partition)]


async def _producers(session: _Session, node: int, partitions: Sequence[TopicPartition]
                     ) -> dict[TopicPartition, list[ProducerState]]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    response = await session.send(node, ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]})
    out: dict[TopicPartition, list[ProducerState]] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if int(p.error_code):
                raise _refused(int(p.error_code), p.error_message,
                               f"partition {topic.name}-{p.partition_index}",
                               "DescribeProducers")
            out[(str(topic.name), int(p.partition_index))] = [
                ProducerState(int(a.producer_id), int(a.producer_epoch), int(a.last_sequence),
                              _millis(a.last_timestamp), int(a.coordinator_epoch),
                              int(a.current_txn_start_offset))
                for a in p.active_producers]
    return out


# ------------------------------------------------------------------------------------ abort
async def abort_spec(target: Target, topic: str, partition: int,
                     start_offset: int) -> AbortSpec:
    """The producer whose open transaction on the partition starts at ``start_offset``."""
    producers = await describe_producers(target, topic, partition)
    for producer in producers:
        if producer.current_txn_start_offset == start_offset:
            return AbortSpec(topic, partition, producer.producer_id, producer.producer_epoch,
                             max(producer.coordinator_epoch, 0))
    raise KafkaClientError("INVALID_REQUEST", "could not find any open transaction starting at "
                           f"offset {start_offset} on partition {topic}-{partition}",
                           subject="", api="DescribeProducers")


async def abort_transaction(target: Target, spec: AbortSpec) -> None:
    """WriteTxnMarkers ABORT for ``spec`` to the partition's leader (needs ClusterAction on
    the cluster). A coordinator epoch below 0 is sent as 0, as Kafka's tool does (a producer
    that never had a marker reports -1)."""
    async with _Session(target) as session:
        await session.metadata([spec.topic])
        node = session.leader(spec.topic, spec.partition)
        response = await session.send(node, ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": spec.producer_id, "producer_epoch": spec.producer_epoch,
            "transaction_result": False,
            "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
            "coordinator_epoch": max(spec.coordinator_epoch, 0)}]})
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if int(p.error_code):
                        raise _refused(int(p.error_code), None,
                                       f"the abort marker of producer {spec.producer_id} on "
                                       f"{topic.name}-{p.partition_index}", "WriteTxnMarkers")


# ----------------------------------------------------------------------------- find-hanging
async def find_hanging(target: Target, *, broker_id: int | None = None,
                       topic: str | None = None, partition: int | None = None,
                       max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                       now_ms: int | None = None) -> list[OpenTransaction]:
    """The hanging transactions of the partitions searched (``topic``, ``topic`` +
    ``partition``, or those with a replica on ``broker_id``)."""
    if topic is None and broker_id is None:
        raise ValueError("find_hanging needs a topic or a broker id")
    if partition is not None and topic is None:
        raise ValueError("a partition needs its topic")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    async with _Session(target) as session:
        view = await session.metadata(None if topic is None else [topic])
        if topic is not None:
            session.leader(topic, partition if partition is not None else 0)
        searched = [tp for tp, (_, replicas) in sorted(view.partitions.items())
                    if (topic is None or tp[0] == topic)
                    and (partition is None or tp[1] == partition)
                    and (broker_id is None or broker_id in replicas)]
        candidates = await _candidates(session, searched, broker_id, max_transaction_timeout_ms,
                                       now)
        if not candidates:
            return []
        producer_ids = sorted({c.producer.producer_id for c in candidates})
        listed = await _list(session, sorted(view.brokers), [], producer_ids, NO_VALUE)
        tids = {t.producer_id: t.transactional_id for t in listed}
        descriptions = await _describe(session, sorted(set(tids.values())))
        return hanging(candidates, tids, descriptions)


async def _candidates(session: _Session, searched: Sequence[TopicPartition],
                      broker_id: int | None, max_timeout_ms: int,
                      now_ms: int) -> list[OpenTransaction]:
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in searched:
        node = broker_id if broker_id is not None else session.view.partitions[tp][0]
        if node >= 0:
            by_node.setdefault(node, []).append(tp)
    out: list[OpenTransaction] = []
    for node, partitions in sorted(by_node.items()):
        found = await _producers(session, node, partitions)
        out += open_transactions(found, max_timeout_ms, now_ms)
    return out


def open_transactions(producers: Mapping[TopicPartition, Sequence[ProducerState]],
                      max_timeout_ms: int, now_ms: int) -> list[OpenTransaction]:
    """The producers with a transaction open for longer than ``max_timeout_ms`` (since their
    last write, as Kafka's tool measures it)."""
    return [OpenTransaction(topic, index, producer)
            for (topic, index), states in sorted(producers.items()) for producer in states
            if producer.current_txn_start_offset >= 0
            and now_ms - producer.last_timestamp > max_timeout_ms]


def hanging(candidates: Sequence[OpenTransaction], transactional_ids: Mapping[int, str],
            descriptions: Mapping[str, TransactionDescription | None]
            ) -> list[OpenTransaction]:
    """Kafka's rule: an open transaction hangs when no coordinator lists its producer id, the
    id is not found, or its coordinator's transaction does not count the partition (then the
    coordinator will never write its marker)."""
    out: list[OpenTransaction] = []
    for candidate in candidates:
        tid = transactional_ids.get(candidate.producer.producer_id)
        description = descriptions.get(tid) if tid is not None else None
        if description is None or (candidate.topic, candidate.partition) \
                not in description.topic_partitions:
            out.append(candidate)
    return out
