"""OffsetDelete v0: delete some committed offsets of a group (KIP-496).

A partition of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; the others go to
``GroupCoordinator.delete_offsets``: an Empty group loses them; a consumer group with members
keeps those of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the rest;
any other group with members is NON_EMPTY_GROUP. Deleted offsets are answered once their
tombstones are on every in-sync replica of the group's ``__consumer_offsets`` partition. A
group-wide error (GROUP_ID_NOT_FOUND,
NOT_COORDINATOR, ...) is the top-level error with no topics.

Authorization: Delete on the group (else GROUP_AUTHORIZATION_FAILED for the request) and
Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from strata.broker.group.classic_group import TopicPartition
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.DELETE, ResourceType.GROUP, request.group_id)
    store = ctx.state.topic_store
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        record = store.get(topic.name)
        readable = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif record is None or not 0 <= p.partition_index < record.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    coordinator = ctx.state.group_coordinator
    error, deleted = coordinator.delete_offsets(request.group_id, known)
    if error == ErrorCode.none and deleted:  # the tombstones on the partition's whole ISR
        deleted = await coordinator.acknowledged(request.group_id, deleted, offsets=False)
    if error != ErrorCode.none:
        return build_response(ApiKey.OFFSET_DELETE, version, error_code=error,
                              throttle_time_ms=0, topics=[])
    errors.update(deleted)
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, index), partition_error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": index,
                                             "error_code": partition_error})
    return build_response(ApiKey.OFFSET_DELETE, version, {
        "error_code": ErrorCode.none,
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })
