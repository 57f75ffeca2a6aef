"""Transaction markers: the pending marker writes of each transaction and their requests.

Kafka's ``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``,
without the network. Once a transaction's PrepareCommit / PrepareAbort is in the log, the
coordinator hands a ``PendingCompleteTxn`` to ``TransactionMarkerBook.add``; from then on:

1. ``build_requests(leader_of)`` drains the partitions waiting to be sent and groups them by
   partition leader into WriteTxnMarkers requests (one marker per transaction and leader, with
   the producer id and epoch of the prepared transaction and the coordinator epoch). A partition
   whose leader is unknown for now stays queued for the next round; a partition that no longer
   exists (``leader_of`` answers None) is dropped: its topic was deleted (Kafka's rule).
2. ``on_response`` / ``on_disconnected`` account for each partition of a request:

   ========================================================  ===================================
   partition error                                           what happens
   ========================================================  ===================================
   NONE                                                      written
   UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION       dropped (the producer could not
                                                             have written there either)
   UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,       queued again (its leader is looked
   NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,    up again in the next round)
   KAFKA_STORAGE_ERROR; a disconnection
   INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED    the transaction's markers are
                                                             cancelled: a newer producer epoch
                                                             or coordinator took over
   anything else (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...)   fatal: reported, left pending (Kafka
                                                             throws; nothing can complete it)
   ========================================================  ===================================

3. A transaction none of whose partitions waits any more is *completed*: returned by ``add``
   (no partitions at all), ``build_requests`` or ``on_response``; the coordinator then appends
   its CompleteCommit / CompleteAbort (``TransactionCoordinator.write_txn_completion``).

``remove_for_txn_partition`` drops everything of a ``__transaction_state`` partition the
coordinator resigns or reloads (Kafka's ``removeMarkersForTxnTopicPartition``): a response to a
request built before that is ignored, as is one for a transaction whose pending completion was
replaced. Pure bookkeeping, owned by the coordinator's task.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from strata.broker.transaction.transaction_metadata import TopicPartition, TxnTransitMetadata
from strata.broker.transaction.transaction_state import TransactionResult
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_request

WRITE_TXN_MARKERS_VERSION: Final = 1  # Kafka 4's lowest; v2 adds the transaction version


@dataclass(frozen=True, slots=True)
class PendingCompleteTxn:
    """A transaction whose prepare is in the log and whose markers are being written."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    result: TransactionResult
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    complete: TxnTransitMetadata
    """The CompleteCommit / CompleteAbort to append once every marker is written."""
    transaction_version: TransactionVersion = TransactionVersion.TV_0


@dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    """One marker of a WriteTxnMarkers request: a transaction's partitions on one leader."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    partitions: tuple[TopicPartition, ...]
    transaction_version: TransactionVersion = TransactionVersion.TV_0


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """A WriteTxnMarkers request for one broker and the entries it carries, in order."""

    node_id: int
    entries: tuple[TxnMarkerEntry, ...]

    def to_request(self, version: int = WRITE_TXN_MARKERS_VERSION) -> Any:
        return build_write_txn_markers_request(self.entries, version)


class MarkerOutcome(enum.Enum):
    WRITTEN = "written"
    DROPPED = "dropped: counts as written"
    RETRY = "queued again"
    CANCELLED = "the transaction's markers are cancelled"
    FATAL = "unexpected: left pending"


_RETRIABLE: Final = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
})
_CANCELLING: Final = frozenset({
    ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
_DROPPING: Final = frozenset({
    ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


def classify_marker_error(error: int) -> MarkerOutcome:
    """What a partition's WriteTxnMarkers error means for its marker (the table above)."""
    if error == ErrorCode.none:
        return MarkerOutcome.WRITTEN
    if error in _DROPPING:
        return MarkerOutcome.DROPPED
    if error in _RETRIABLE:
        return MarkerOutcome.RETRY
    if error in _CANCELLING:
        return MarkerOutcome.CANCELLED
    return MarkerOutcome.FATAL


def build_write_txn_markers_request(entries: Sequence[TxnMarkerEntry],
                                    version: int = WRITE_TXN_MARKERS_VERSION) -> Any:
    """The kio WriteTxnMarkers request of ``entries`` (topics and partitions sorted)."""
    markers = []
    for entry in entries:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(entry.partitions):
            topics.setdefault(topic, []).append(partition)
        markers.append({
            "producer_id": entry.producer_id,
            "producer_epoch": entry.producer_epoch,
            "transaction_result": entry.result.value,
            "topics": [{"name": name, "partition_indexes": tuple(partitions)}
                       for name, partitions in topics.items()],
            "coordinator_epoch": entry.coordinator_epoch,
            "transaction_version": int(entry.transaction_version),
        })
    return build_request(ApiKey.WRITE_TXN_MARKERS, version, markers=markers)


def partition_errors(response: Any) -> dict[int, dict[TopicPartition, int]]:
    """A WriteTxnMarkers response as producer id -> partition -> error code."""
    errors: dict[int, dict[TopicPartition, int]] = {}
    for marker in response.markers:
        by_partition = errors.setdefault(int(marker.producer_id), {})
        for topic in marker.topics:
            for partition in topic.partitions:
                by_partition[(str(topic.name), int(partition.partition_index))] = int(
                    partition.error_code)
    return errors


@dataclass(slots=True)
class _Txn:
    pending: PendingCompleteTxn
    queued: set[TopicPartition]
    in_flight: set[TopicPartition] = field(default_factory=set)
    failed: set[TopicPartition] = field(default_factory=set)
    """Partitions answered with an unexpected error: never completed by themselves."""

    @property
    def done(self) -> bool:
        return not self.queued and not self.in_flight and not self.failed


@dataclass(frozen=True, slots=True)
class MarkerResults:
    """What one response (or disconnection) changed."""

    completed: tuple[PendingCompleteTxn, ...] = ()
    cancelled: tuple[PendingCompleteTxn, ...] = ()
    fatal: tuple[tuple[str, TopicPartition, int], ...] = ()
    outcomes: Mapping[tuple[str, TopicPartition], MarkerOutcome] = field(default_factory=dict)


class TransactionMarkerBook:
    """The partitions whose marker is not yet acknowledged, per transactional id."""

    def __init__(self) -> None:
        self._txns: dict[str, _Txn] = {}

    def __len__(self) -> int:
        """Transactions with markers pending (Kafka's ``numTxnsWithPendingMarkers``)."""
        return len(self._txns)

    def pending(self, transactional_id: str) -> PendingCompleteTxn | None:
        txn = self._txns.get(transactional_id)
        return txn.pending if txn is not None else None

    def waiting_partitions(self, transactional_id: str) -> frozenset[TopicPartition]:
        """The partitions whose marker is not acknowledged yet (queued, in flight or failed)."""
        txn = self._txns.get(transactional_id)
        return frozenset() if txn is None else frozenset(txn.queued | txn.in_flight | txn.failed)

    def add(self, pending: PendingCompleteTxn) -> list[PendingCompleteTxn]:
        """Start writing the markers of ``pending`` (replacing an older pending completion of
        the same id); returns it at once if it has no partitions."""
        if not pending.partitions:
            self._txns.pop(pending.transactional_id, None)
            return [pending]
        self._txns[pending.transactional_id] = _Txn(pending, set(pending.partitions))
        return []

    def build_requests(
        self, leader_of: Callable[[TopicPartition], int | None],
    ) -> tuple[list[MarkerRequest], list[PendingCompleteTxn]]:
        """The requests for every queued partition with a known leader, and the transactions
        completed by dropping partitions that no longer exist.

        ``leader_of`` answers the leader's node id, -1 when the partition has no leader now
        (kept queued), or None when the partition does not exist (dropped)."""
        by_node: dict[int, list[TxnMarkerEntry]] = {}
        completed: list[PendingCompleteTxn] = []
        for transactional_id, txn in list(self._txns.items()):
            groups: dict[int, list[TopicPartition]] = {}
            for tp in sorted(txn.queued):
                leader = leader_of(tp)
                if leader is None:
                    txn.queued.discard(tp)
                elif leader >= 0:
                    groups.setdefault(leader, []).append(tp)
            for node_id, partitions in groups.items():
                txn.queued.difference_update(partitions)
                txn.in_flight.update(partitions)
                p = txn.pending
                by_node.setdefault(node_id, []).append(TxnMarkerEntry(
                    transactional_id, p.producer_id, p.producer_epoch, p.coordinator_epoch,
                    p.result, tuple(partitions), p.transaction_version))
            if txn.done:
                del self._txns[transactional_id]
                completed.append(txn.pending)
        requests = [MarkerRequest(node_id, tuple(entries))
                    for node_id, entries in sorted(by_node.items())]
        return requests, completed

    def on_disconnected(self, request: MarkerRequest) -> None:
        """The broker was unreachable: every partition of the request is queued again."""
        for entry in request.entries:
            txn = self._current(entry)
            if txn is not None:
                moved = txn.in_flight.intersection(entry.partitions)
                txn.in_flight.difference_update(moved)
                txn.queued.update(moved)

    def on_response(self, request: MarkerRequest,
                    errors: Mapping[int, Mapping[TopicPartition, int]]) -> MarkerResults:
        """Account for a WriteTxnMarkers response (``partition_errors`` of it). A partition the
        response does not mention is queued again."""
        completed: list[PendingCompleteTxn] = []
        cancelled: list[PendingCompleteTxn] = []
        fatal: list[tuple[str, TopicPartition, int]] = []
        outcomes: dict[tuple[str, TopicPartition], MarkerOutcome] = {}
        for entry in request.entries:
            txn = self._current(entry)
            if txn is None:
                continue
            by_partition = errors.get(entry.producer_id, {})
            for tp in entry.partitions:
                if tp not in txn.in_flight:
                    continue
                outcome = classify_marker_error(
                    by_partition.get(tp, ErrorCode.request_timed_out))
                outcomes[(entry.transactional_id, tp)] = outcome
                if outcome is MarkerOutcome.CANCELLED:
                    del self._txns[entry.transactional_id]
                    cancelled.append(txn.pending)
                    break
                txn.in_flight.discard(tp)
                if outcome is MarkerOutcome.RETRY:
                    txn.queued.add(tp)
                elif outcome is MarkerOutcome.FATAL:
                    txn.failed.add(tp)
                    fatal.append((entry.transactional_id, tp,
                                  by_partition.get(tp, ErrorCode.unknown_server_error)))
            else:
                if txn.done:
                    del self._txns[entry.transactional_id]
                    completed.append(txn.pending)
        return MarkerResults(tuple(completed), tuple(cancelled), tuple(fatal), outcomes)

    def remove(self, transactional_id: str) -> PendingCompleteTxn | None:
        txn = self._txns.pop(transactional_id, None)
        return txn.pending if txn is not None else None

    def remove_for_txn_partition(self, txn_partition: int) -> list[PendingCompleteTxn]:
        """Forget every transaction of a ``__transaction_state`` partition (resignation,
        reload)."""
        removed = [tid for tid, txn in self._txns.items()
                   if txn.pending.txn_partition == txn_partition]
        return [self._txns.pop(tid).pending for tid in removed]

    def _current(self, entry: TxnMarkerEntry) -> _Txn | None:
        txn = self._txns.get(entry.transactional_id)
        if (txn is None or txn.pending.coordinator_epoch != entry.coordinator_epoch
                or txn.pending.producer_id != entry.producer_id
                or txn.pending.producer_epoch != entry.producer_epoch):
            return None
        return txn
