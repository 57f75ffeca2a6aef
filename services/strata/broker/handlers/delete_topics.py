"""DeleteTopics (key 20, v1-6): remove topics, their partitions and their data.

Topics are named (v0-5 ``topic_names``) or, from v6, given by name or by topic id (``topics``):
an unknown id is UNKNOWN_TOPIC_ID, both or neither INVALID_REQUEST. The answer names the topic
and (v6) carries its id, except that the name of a topic asked for by id stays null when the
caller may not delete it. v5 adds ``error_message``.

Per topic: without Delete on it (with an authorizer), TOPIC_AUTHORIZATION_FAILED, checked
first so nothing tells an unauthorized caller whether the topic exists; an unknown name
(legal or not) is UNKNOWN_TOPIC_OR_PARTITION; with
``delete.topic.enable=false`` every topic gets TOPIC_DELETION_DISABLED. Otherwise the topic is
removed from the ``TopicStore`` first (from then on it does not exist for any client), then each
partition stops being hosted (waiting fetches wake and see it gone) and its log directory is
deleted in a worker thread (a large ``rmtree`` must not stall the loop), and every consumer
group forgets its committed offsets of those partitions (tombstones in ``__consumer_offsets``,
Kafka's ``onPartitionsDeleted``). A crash between these steps leaves stray logs, which the next
startup deletes (``server._reconcile_logs``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.network.request_context import RequestContext
from strata.broker.quotas.request_quotas import MutationQuota
from strata.broker.topic_store import UnknownTopicError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)


async def delete_topic(state: BrokerState, name: str) -> None:
    """Unregister ``name`` and delete its partitions' logs; ``UnknownTopicError`` if absent."""
    record = await state.topic_store.delete_topic(name)
    if state.cluster is not None:  # each broker drops its replicas when it sees the deletion
        logger.info("deleted topic %s (%d partitions)", name, record.partitions)
        return
    for index in range(record.partitions):
        state.replica_manager.remove_partition(name, index)
    for index in range(record.partitions):
        await asyncio.to_thread(state.log_manager.delete_log, name, index)
    state.group_coordinator.on_partitions_deleted([(name, i) for i in range(record.partitions)])
    logger.info("deleted topic %s (%d partitions)", name, record.partitions)


def requested_topics(request: Any) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, topic id) per topic asked for, in order: v6 names either, older versions names."""
    if hasattr(request, "topic_names"):
        return [(name, None) for name in request.topic_names]
    return [(t.name, t.topic_id if t.topic_id and t.topic_id.int else None)
            for t in request.topics]


def resolve(state: BrokerState, name: str | None,
            topic_id: uuid.UUID | None) -> tuple[str | None, uuid.UUID | None, ErrorCode]:
    """The topic's name and id, and the error if it cannot be resolved (module docstring)."""
    if name is not None and topic_id is not None:
        return name, topic_id, ErrorCode.invalid_request
    if topic_id is not None:
        for record in state.topic_store.topics().values():
            if record.topic_id == topic_id:
                return record.name, topic_id, ErrorCode.none
        return None, topic_id, ErrorCode.unknown_topic_id
    if name is None:
        return None, None, ErrorCode.invalid_request
    named = state.topic_store.get(name)
    return name, named.topic_id if named is not None else None, ErrorCode.none


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    quota = MutationQuota(state.quotas, ctx.principal, ctx.header.client_id,
                          ctx.header.api_key, ctx.header.api_version, state.clock.milliseconds())
    results = []
    for asked_name, asked_id in dict.fromkeys(requested_topics(request)):
        name, topic_id, error = resolve(state, asked_name, asked_id)
        message = None
        if error == ErrorCode.invalid_request:
            message = ("You may not specify both topic name and topic id." if asked_name
                       else "Neither topic name nor id were specified.")
        elif error == ErrorCode.unknown_topic_id:
            message = "Topic id not found."
        elif name is not None and not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC,
                                                    name):
            error = ErrorCode.topic_authorization_failed
            if asked_name is None:  # an unauthorized caller does not learn the name
                name = None
            topic_id = asked_id
        elif not state.config.delete_topic_enable:
            error = ErrorCode.topic_deletion_disabled
        elif name is not None and not quota.admit(_partitions(state, name)):
            error = ErrorCode.throttling_quota_exceeded
            message = "The throttling quota has been exceeded."
        elif name is not None:
            try:
                await delete_topic(state, name)
            except UnknownTopicError:
                error = ErrorCode.unknown_topic_or_partition
                topic_id = asked_id
        results.append({"name": name, "topic_id": topic_id,
                        "error_code": error, "error_message": message})
    ctx.throttle_time_ms = max(ctx.throttle_time_ms, quota.throttle_time_ms())
    return build_response(ApiKey.DELETE_TOPICS, ctx.header.api_version,
                          {"throttle_time_ms": ctx.throttle_time_ms, "responses": results})


def _partitions(state: BrokerState, name: str) -> int:
    record = state.topic_store.get(name)
    return 0 if record is None else record.partitions
