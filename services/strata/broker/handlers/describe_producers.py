"""DescribeProducers (key 61, v0, flexible): active idempotent producers of partitions (KIP-664).

What ``kafka-transactions.sh describe-producers`` and the admin clients' ``describeProducers``
ask a partition's leader. Per partition: every producer id the log's producer state still
holds (not expired by ``producer.id.expiration.ms``) with its epoch, the last sequence and
timestamp it wrote, the coordinator epoch of its last marker (-1 before any) and
``current_txn_start_offset``: the first offset of its ongoing transaction, -1 when none (what
``kafka-transactions.sh find-hanging`` looks at).

Errors per partition, as Kafka: UNKNOWN_TOPIC_OR_PARTITION when this broker does not host it,
NOT_LEADER_OR_FOLLOWER when it hosts it but does not lead it (the producer state a client
wants is the leader's). Authorization: Read on the topic, else TOPIC_AUTHORIZATION_FAILED for
each of its partitions.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


def _partition(ctx: RequestContext, topic: str, index: int, allowed: bool) -> dict[str, Any]:
    def refused(error_code: ErrorCode, message: str | None = None) -> dict[str, Any]:
        return {"partition_index": index, "error_code": error_code, "error_message": message,
                "active_producers": []}

    if not allowed:
        return refused(ErrorCode.topic_authorization_failed)
    partition = ctx.state.replica_manager.get_partition(topic, index)
    if partition is None:
        return refused(ErrorCode.unknown_topic_or_partition,
                       f"this server does not host {topic}-{index}")
    if not partition.is_leader:
        return refused(ErrorCode.not_leader_or_follower,
                       f"broker {ctx.state.node_id} is not the leader of {topic}-{index}")
    producers = [
        {"producer_id": producer_id, "producer_epoch": entry.producer_epoch,
         "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
         "coordinator_epoch": entry.coordinator_epoch,
         "current_txn_start_offset": entry.current_txn_first_offset}
        for producer_id, entry in sorted(partition.log.producer_state.active_producers.items())
    ]
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None,
            "active_producers": producers}


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for topic in request.topics:
        allowed = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
        topics.append({"name": topic.name,
                       "partitions": [_partition(ctx, topic.name, index, allowed)
                                      for index in topic.partition_indexes]})
    return build_response(ApiKey.DESCRIBE_PRODUCERS, ctx.header.api_version, throttle_time_ms=0,
                          topics=topics)
