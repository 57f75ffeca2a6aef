"""DeleteTopics (key 20, v1-3): remove topics, their partitions and their data.

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
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.network.connection import RequestContext
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


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    results = []
    for name in dict.fromkeys(request.topic_names):
        error = ErrorCode.none
        if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            error = ErrorCode.topic_authorization_failed
        elif not state.config.delete_topic_enable:
            error = ErrorCode.topic_deletion_disabled
        else:
            try:
                await delete_topic(state, name)
            except UnknownTopicError:
                error = ErrorCode.unknown_topic_or_partition
        results.append({"name": name, "error_code": error, "error_message": None})
    return build_response(ApiKey.DELETE_TOPICS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "responses": results})
