"""OffsetFetch v1-v5: a group's committed offsets.

Per partition: the committed offset, its leader epoch (v5+; -1 unknown) and metadata, or offset
-1 with metadata "" when nothing is committed (also for unknown topics: Kafka does not check).
v2+ may ask for every partition the group committed (``topics`` null). Errors of the group as a
whole (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) are the top-level ``error_code``
from v2 (with no topics), and each requested partition's error in v1, which has no top-level
field (Kafka's ``getErrorResponse``).

Authorization: Describe on the group (else GROUP_AUTHORIZATION_FAILED); topics asked for
without Describe on them are TOPIC_AUTHORIZATION_FAILED, and left out of an all-topics answer.
"""

from __future__ import annotations

from typing import Any

from strata.broker.group.classic_group import OffsetAndMetadata, TopicPartition
from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response

MIN_VERSION = 1
MAX_VERSION = 5

INVALID_OFFSET = -1
NO_METADATA = ""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    coordinator = ctx.state.group_coordinator
    requested: list[TopicPartition] | None = None
    if request.topics is not None:
        requested = [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error, offsets = coordinator.fetch_offsets(request.group_id, requested)
    if error != ErrorCode.none:
        if version >= 2:
            return _response(version, error, [])
        return _response(version, error, [(tp, None, error) for tp in requested or []])

    def described(topic: str) -> bool:
        return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    if requested is None:  # every committed offset: those of undescribable topics are left out
        requested = [tp for tp in sorted(offsets) if described(tp[0])]
    return _response(version, ErrorCode.none, [
        (tp, offsets.get(tp), ErrorCode.none) if described(tp[0])
        else (tp, None, ErrorCode.topic_authorization_failed) for tp in requested])


def _response(version: int, error: ErrorCode,
              partitions: list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]]
              ) -> Any:
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, index), committed, partition_error in partitions:
        topics.setdefault(topic, []).append({
            "partition_index": index,
            "committed_offset": committed.offset if committed else INVALID_OFFSET,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else NO_METADATA,
            "error_code": partition_error,
        })
    return build_response(ApiKey.OFFSET_FETCH, version, {
        "throttle_time_ms": 0,
        "error_code": error,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })
