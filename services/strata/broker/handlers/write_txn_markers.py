"""WriteTxnMarkers (key 27, v1-v2, flexible): a transaction coordinator ends a transaction on
the partitions it wrote to.

Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``. Sent broker to broker (the coordinator's
marker channel, ``strata.broker.transaction.transaction_markers``) to each partition's leader.
For every marker (producer id, producer epoch, coordinator epoch, COMMIT or ABORT) and every
partition it names, the handler appends one control batch (``build_end_transaction_marker``)
as the leader with ``origin=COORDINATOR`` and ``acks=all``: the answer comes once the marker
is below the high watermark (the produce purgatory), as Kafka appends markers with
``requiredAcks=-1``, after at most ``request.timeout.ms`` (Kafka's default, 30 s).

Answers per partition (Kafka's codes):

* NONE: the marker is appended and replicated to the ISR;
* UNKNOWN_TOPIC_OR_PARTITION: this broker does not host the partition;
* NOT_LEADER_OR_FOLLOWER: it hosts it as a follower (the coordinator looks the leader up again);
* INVALID_PRODUCER_EPOCH: the marker's producer epoch is older than the partition's producer
  state knows; TRANSACTION_COORDINATOR_FENCED: its coordinator epoch is older (storage checks
  both, ``ProducerStateManager.check_marker``);
* NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR as for a produce;
* CORRUPT_MESSAGE for every partition of a marker whose ``transaction_version`` (v2) is not a
  transaction version Kafka defines (0, 1 or 2): nothing of that marker is appended;
* CLUSTER_AUTHORIZATION_FAILED for every partition when the principal lacks ClusterAction on
  the cluster (an inter-broker API; Kafka refuses the whole request).

Markers on ``__consumer_offsets`` partitions also end the producer's pending transactional
offset commits on that partition (``GroupCoordinator.complete_transaction``): COMMIT makes
them the groups' committed offsets, ABORT drops them (Kafka's ``onTransactionCompleted``,
called once the marker is written).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from strata.broker.network.request_context import RequestContext
from strata.broker.replication.partition_results import PartitionAppendResult
from strata.broker.replication.replica_manager import TopicPartition
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.log_transactions import AppendOrigin
from strata.storage.records import build_end_transaction_marker

MARKER_TIMEOUT_MS: Final = 30_000  # Kafka appends markers with request.timeout.ms (default)
TRANSACTION_VERSIONS: Final = frozenset({0, 1, 2})  # Kafka's TransactionVersion TV_0..TV_2
OFFSETS_TOPIC: Final = "__consumer_offsets"

logger = logging.getLogger(__name__)


def _result(partitions: list[tuple[str, int]], errors: dict[TopicPartition, int]
            ) -> list[dict[str, Any]]:
    """Kafka's topic/partition nesting of one marker's results, in request order."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in partitions:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": errors[tp]})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def _write_marker(ctx: RequestContext, marker: Any, authorized: bool,
                        now_ms: int) -> dict[str, Any]:
    partitions = [(t.name, index) for t in marker.topics for index in t.partition_indexes]
    errors: dict[TopicPartition, int] = {}
    version = getattr(marker, "transaction_version", 0)
    if not authorized:
        errors = dict.fromkeys(partitions, ErrorCode.cluster_authorization_failed)
    elif version not in TRANSACTION_VERSIONS:
        errors = dict.fromkeys(partitions, ErrorCode.corrupt_message)
    else:
        replica_manager = ctx.state.replica_manager
        commit = bool(marker.transaction_result)
        entries: list[tuple[TopicPartition, bytes]] = []
        for tp in partitions:
            if tp in errors:
                continue  # a partition named twice: written once
            if replica_manager.get_partition(*tp) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            errors[tp] = ErrorCode.none
            entries.append((tp, build_end_transaction_marker(
                marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, commit,
                now_ms)))
        results: list[PartitionAppendResult] = []
        if entries:
            results = await replica_manager.append_records(
                entries, -1, MARKER_TIMEOUT_MS, AppendOrigin.COORDINATOR)
        offsets_partitions: list[int] = []
        for (tp, _), result in zip(entries, results, strict=True):
            errors[tp] = result.error_code
            if tp[0] == OFFSETS_TOPIC and result.error_code == ErrorCode.none:
                offsets_partitions.append(tp[1])
        if offsets_partitions:
            errors.update(_complete_offsets(ctx, marker.producer_id, offsets_partitions, commit))
    return {"producer_id": marker.producer_id, "topics": _result(partitions, errors)}


def _complete_offsets(ctx: RequestContext, producer_id: int, partitions: list[int],
                      commit: bool) -> dict[TopicPartition, int]:
    """Materialize or drop the producer's pending transactional offsets (Kafka answers
    UNKNOWN_SERVER_ERROR for the offsets partitions if that fails)."""
    try:
        ctx.state.group_coordinator.complete_transaction(producer_id, partitions, commit)
    except Exception:  # Kafka: "exception while trying to update the offsets cache"
        logger.exception(
            "completing the transactional offsets of producer %d failed", producer_id)
        return {(OFFSETS_TOPIC, p): ErrorCode.unknown_server_error for p in partitions}
    return {}


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorized = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    now_ms = ctx.state.clock.milliseconds()
    # Concurrently, as Kafka: each marker's appends happen in request order (a task runs up to
    # its first wait, the replication), then all wait for the high watermark together.
    markers = await asyncio.gather(*(_write_marker(ctx, marker, authorized, now_ms)
                                     for marker in request.markers))
    return build_response(ApiKey.WRITE_TXN_MARKERS, ctx.header.api_version, markers=list(markers))
