"""TxnOffsetCommit (key 28, v0-v5; v3+ flexible): a transactional producer's consumed offsets.

Kafka's ``KafkaApis.handleTxnOffsetCommitRequest``. What ``send_offsets_to_transaction`` sends
to the group's coordinator after AddOffsetsToTxn: the offsets go to ``__consumer_offsets`` as
transactional records of the producer (its id and epoch on the batch) and stay pending until
the transaction coordinator's marker lands on that offsets partition (WriteTxnMarkers): COMMIT
makes them the group's committed offsets, ABORT drops them (``GroupCoordinator``'s
``commit_transactional_offsets`` / ``complete_transaction``).

Answers per partition, in request order (Kafka's codes):

* authorization, Kafka's order: Write on the ``transactional_id`` (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Read on the group (else
  GROUP_AUTHORIZATION_FAILED), Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its
  partitions);
* a topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION;
* the group's status (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID ...),
  and from v3 (KIP-447, which adds ``generation_id``, ``member_id``, ``group_instance_id``) the
  member checks: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION;
* INVALID_PRODUCER_EPOCH when the producer's epoch is older than the offsets partition knows
  (storage), OFFSET_METADATA_TOO_LARGE, and the append's errors as for OffsetCommit (whose
  answer, like this one, waits for the batch to reach every in-sync replica).

v2+ carry each partition's ``committed_leader_epoch``.

Verification (KIP-890, ``transaction.partition.verification.enable``): before the append the
group's ``__consumer_offsets`` partition is checked with the transaction coordinator, as a
partition leader checks a produce (``AddPartitionsToTxnManager``); a transactions v2 client
(v5+ with ``transaction.version`` 2) sends no AddOffsetsToTxn, so the coordinator *adds* the
partition here. A failure answers every partition with its error (the retriable ones as
COORDINATOR_NOT_AVAILABLE, ``transaction_verification.txn_offset_commit_error``).
"""

from __future__ import annotations

from typing import Any

from strata.broker.group.classic_group import OffsetAndMetadata, TopicPartition
from strata.broker.group.member import UNKNOWN_MEMBER_ID
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_verification import (
    operation_for_txn_offset_commit,
    txn_offset_commit_error,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import StorageError
from strata.storage.record_batch import NO_SEQUENCE
from strata.storage.verification_state import SENTINEL_GUARD

MEMBER_FIELDS_VERSION = 3  # generation_id, member_id, group_instance_id (KIP-447)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    state = ctx.state
    now = state.clock.milliseconds()
    store = state.topic_store
    refused: ErrorCode | None = None
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        refused = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        refused = ErrorCode.group_authorization_failed
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        record = store.get(topic.name)
        topic_refused = refused
        if topic_refused is None and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC,
                                                       topic.name):
            topic_refused = ErrorCode.topic_authorization_failed
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic_refused is not None:
                errors[tp] = topic_refused
            elif record is None or not 0 <= p.partition_index < record.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                leader_epoch = p.committed_leader_epoch if version >= 2 else -1
                offsets[tp] = OffsetAndMetadata(p.committed_offset, leader_epoch,
                                                p.committed_metadata or "", now, None)
    if offsets:
        guard, failed = await _verify(ctx, request, version)
        with_member = version >= MEMBER_FIELDS_VERSION
        if failed is not None:
            errors.update(dict.fromkeys(offsets, failed))
        else:
            coordinator = state.group_coordinator
            errors.update(await coordinator.acknowledged(
                request.group_id, coordinator.commit_transactional_offsets(
                    request.group_id, request.producer_id, request.producer_epoch,
                    request.member_id if with_member else UNKNOWN_MEMBER_ID,
                    request.group_instance_id if with_member else None,
                    request.generation_id if with_member else -1, offsets, guard),
                offsets=True))
    return build_response(ApiKey.TXN_OFFSET_COMMIT, version, {
        "throttle_time_ms": 0,
        "topics": [{"name": topic.name,
                    "partitions": [{"partition_index": p.partition_index,
                                    "error_code": errors[(topic.name, p.partition_index)]}
                                   for p in topic.partitions]}
                   for topic in request.topics],
    })


async def _verify(ctx: RequestContext, request: Any,
                  version: int) -> tuple[int | None, ErrorCode | None]:
    """(the append's verification guard, None: not in use; the error that refuses the commit,
    None: verified). Only a group led here is verified (elsewhere the commit answers
    NOT_COORDINATOR)."""
    state = ctx.state
    config = state.transaction_coordinator.config
    if not config.partition_verification_enable:
        return None, None
    tp = (OFFSETS_TOPIC, state.group_coordinator.partition_for(request.group_id))
    hosted = state.replica_manager.get_partition(*tp)
    if hosted is None or not hosted.is_leader:
        return None, None
    try:
        guard = hosted.log.maybe_start_transaction_verification(
            request.producer_id, NO_SEQUENCE, request.producer_epoch)
    except StorageError:
        return None, None
    if guard == SENTINEL_GUARD:
        return guard, None
    failed = await state.add_partitions_to_txn.verify_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp],
        operation_for_txn_offset_commit(version, config.transaction_version))
    error = failed.get(tp)
    return guard, None if error is None else txn_offset_commit_error(error)
