"""DescribeTopicPartitions (key 75, v0, flexible): topics and their partitions, a page at a time.

What Kafka 4's ``kafka-topics.sh --describe`` and the Java admin client's ``describeTopics``
ask instead of Metadata (KIP-966), so a topic with very many partitions is described in pages:
the topics asked for (none: every topic the principal may Describe), sorted by name, each
with its id and partitions as Metadata describes them (``metadata.describe_topic``), starting
at ``cursor`` (a topic and a partition) and stopping after ``response_partition_limit``
partitions (capped at ``max.request.partition.size.limit``, Kafka's 2000); ``next_cursor``
then names where the next page starts. Eligible-leader replicas (KIP-966 ELR) are not built:
``eligible_leader_replicas`` and ``last_known_elr`` are empty.

Errors as Kafka's handler answers them: a cursor on a topic not asked for is INVALID_REQUEST
(on every topic asked for); a topic that does not exist UNKNOWN_TOPIC_OR_PARTITION and one the
principal may not Describe TOPIC_AUTHORIZATION_FAILED (both with the zero topic id and no
partitions; kio writes None as the zero id).
"""

from __future__ import annotations

from typing import Any, Final, cast

from strata.broker.handlers.metadata import describe_topic
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType

MAX_PARTITION_LIMIT_DEFAULT: Final = 2000


def _refused(name: str, error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": None, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    store = state.topic_store
    cap = state.config.get_int("max.request.partition.size.limit")
    limit = max(1, min(request.response_partition_limit, cap))
    if request.topics:
        names = sorted({t.name for t in request.topics})
    else:
        names = [n for n in sorted(store.topics())
                 if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
    cursor = request.cursor
    if cursor is not None:
        if request.topics and cursor.topic_name not in names:  # Kafka: InvalidRequestException
            return build_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, ctx.header.api_version,
                                  throttle_time_ms=0, next_cursor=None, topics=[
                                      _refused(n, ErrorCode.invalid_request) for n in names])
        names = [n for n in names if n >= cursor.topic_name]
    topics: list[dict[str, Any]] = []
    next_cursor = None
    left = limit
    for name in names:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append(_refused(name, ErrorCode.topic_authorization_failed))
            continue
        record = store.get(name)
        if record is None:
            topics.append(_refused(name, ErrorCode.unknown_topic_or_partition))
            continue
        if left == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = describe_topic(state, record)
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name \
            else 0
        described = cast("list[dict[str, Any]]", topic["partitions"])
        partitions = [{**p, "eligible_leader_replicas": [], "last_known_elr": []}
                      for p in described if p["partition_index"] >= start]
        if len(partitions) > left:
            next_cursor = {"topic_name": name,
                           "partition_index": partitions[left]["partition_index"]}
            partitions = partitions[:left]
        left -= len(partitions)
        topics.append({**topic, "partitions": partitions})
        if next_cursor is not None:
            break
    return build_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, ctx.header.api_version,
                          throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
