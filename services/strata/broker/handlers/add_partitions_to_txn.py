"""AddPartitionsToTxn v0-v5: partitions join a producer's open transaction.

Two forms, as in Kafka:

* v0-v3, a client's: one transactional id, its producer id and epoch, the topics. Checked as
  Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest`` does: Write on the transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), then Write on each topic
  (TOPIC_AUTHORIZATION_FAILED) and the topic's existence (UNKNOWN_TOPIC_OR_PARTITION), the
  other partitions OPERATION_NOT_ATTEMPTED when one fails; then the coordinator's decision
  (``TransactionCoordinator.handle_add_partitions_to_transaction``, written to
  ``__transaction_state`` before the answer), its error on every partition. PRODUCER_FENCED
  is INVALID_PRODUCER_EPOCH before v2.
* v4+, a broker's (KIP-890): a batch of transactions, ClusterAction on the Cluster required
  (CLUSTER_AUTHORIZATION_FAILED at the top level). A transaction with ``verify_only`` asks
  whether each partition is already in the transaction (TRANSACTION_ABORTABLE if not); one
  without adds its partitions for a transactions v2 client.

Each partition gets one result, per topic, per transaction (v4+) in request order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_decision import fenced_error_for_version
from strata.broker.transaction.transaction_metadata import TopicPartition
from strata.broker.transaction.transaction_version import (
    FIRST_ADD_PARTITIONS_TO_TXN_VERSION_OF_TV_2,
    TransactionVersion,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

PartitionResults = dict[TopicPartition, ErrorCode]


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    if version < FIRST_ADD_PARTITIONS_TO_TXN_VERSION_OF_TV_2:
        partitions = _partitions(request.v3_and_below_topics)
        results = await _add(ctx, version, request.v3_and_below_transactional_id,
                             int(request.v3_and_below_producer_id),
                             int(request.v3_and_below_producer_epoch), partitions,
                             verify_only=False, check_topics=True)
        return build_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, throttle_time_ms=0,
                              results_by_topic_v3_and_below=_topic_results(results))
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return build_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, throttle_time_ms=0,
                              error_code=ErrorCode.cluster_authorization_failed,
                              results_by_transaction=[])
    by_transaction = []
    for txn in request.transactions:
        results = await _add(ctx, version, txn.transactional_id, int(txn.producer_id),
                             int(txn.producer_epoch), _partitions(txn.topics),
                             verify_only=bool(txn.verify_only), check_topics=False)
        by_transaction.append({"transactional_id": txn.transactional_id,
                               "topic_results": _topic_results(results)})
    return build_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, throttle_time_ms=0,
                          error_code=ErrorCode.none, results_by_transaction=by_transaction)


async def _add(ctx: RequestContext, version: int, transactional_id: str, producer_id: int,
               producer_epoch: int, partitions: list[TopicPartition], *, verify_only: bool,
               check_topics: bool) -> PartitionResults:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    if check_topics:
        refused: PartitionResults = {}
        for topic, index in partitions:
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, topic):
                refused[(topic, index)] = ErrorCode.topic_authorization_failed
            else:
                record = ctx.state.topic_store.get(topic)
                if record is None or not 0 <= index < record.partitions:
                    refused[(topic, index)] = ErrorCode.unknown_topic_or_partition
        if refused:
            return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    runtime = ctx.state.transaction_coordinator
    coordinator = runtime.coordinator
    if verify_only:
        runtime.reconcile()
        return coordinator.handle_verify_partitions_in_transaction(
            transactional_id, producer_id, producer_epoch, partitions)
    client_version = TransactionVersion.for_add_partitions_to_txn(version)
    answer = await runtime.run(lambda: coordinator.handle_add_partitions_to_transaction(
        transactional_id, producer_id, producer_epoch, partitions, client_version,
        ctx.state.clock.milliseconds()), transactional_id)
    error = fenced_error_for_version(ApiKey.ADD_PARTITIONS_TO_TXN, version, answer.error)
    return dict.fromkeys(partitions, error)


def _partitions(topics: Sequence[Any]) -> list[TopicPartition]:
    seen: dict[TopicPartition, None] = {}
    for topic in topics:
        for index in topic.partitions:
            seen[(str(topic.name), int(index))] = None
    return list(seen)


def _topic_results(results: PartitionResults) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": error})
    return [{"name": topic, "results_by_partition": partitions}
            for topic, partitions in by_topic.items()]
