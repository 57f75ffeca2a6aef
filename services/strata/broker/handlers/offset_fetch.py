"""OffsetFetch v1-v9: committed offsets of one group (v1-v7) or of several (v8+).

Per partition: the committed offset, its leader epoch (v5+; -1 unknown) and metadata, or offset
-1 with metadata "" when nothing is committed (also for unknown topics: Kafka does not check).
v2+ may ask for every partition the group committed (``topics`` null). Errors of a group as a
whole (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) are that group's ``error_code`` with
no topics from v2, and each requested partition's error in v1, which has no group-level field
(Kafka's ``getErrorResponse``). The answer waits until every write it may show is on each
in-sync replica of the group's ``__consumer_offsets`` partition (``fetch_replicated``), so it
never shows what a failover of the coordinator could take back. Version rules:

* v6 is flexible (KIP-482); v7 carries ``require_stable`` (KIP-447): a partition whose offset
  an undecided transaction holds (TxnOffsetCommit, not yet ended by its marker) is then
  UNSTABLE_OFFSET_COMMIT with offset -1 (the consumer retries); without it the last committed
  offset is answered;
* v8 (KIP-709) asks for a batch of ``groups``, each answered on its own (its own errors), in
  request order;
* v9 (KIP-848) names the fetching member (``member_id``, ``member_epoch``): for a classic group
  Kafka ignores both (``ClassicGroup.validateOffsetFetch``), and so does this broker; for a
  consumer group a member must be at its current epoch (UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH for the group; no member id and epoch -1, an admin, always may).

Authorization: Describe on each group (else GROUP_AUTHORIZATION_FAILED for that group); topics
asked for without Describe on them are TOPIC_AUTHORIZATION_FAILED, and left out of an
all-topics answer.
"""

from __future__ import annotations

from typing import Any, Final

from strata.broker.group.classic_group import OffsetAndMetadata, TopicPartition
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

INVALID_OFFSET: Final = -1
NO_METADATA: Final = ""
BATCHED_VERSION: Final = 8
"""The first version with several groups per request (KIP-709)."""

Answer = list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    stable = getattr(request, "require_stable", False)
    if version < BATCHED_VERSION:
        error, partitions = await fetch_replicated(ctx, version, request.group_id,
                                                   request.topics, stable)
        return build_response(ApiKey.OFFSET_FETCH, version, {
            "throttle_time_ms": 0, "error_code": error, "topics": _topics(partitions)})
    groups = []
    for group in request.groups:
        error, partitions = await fetch_replicated(ctx, version, group.group_id, group.topics,
                                                   stable, getattr(group, "member_id", None),
                                                   getattr(group, "member_epoch", -1))
        groups.append({"group_id": group.group_id, "error_code": error,
                       "topics": _topics(partitions)})
    return build_response(ApiKey.OFFSET_FETCH, version, throttle_time_ms=0, groups=groups)


async def fetch_replicated(ctx: RequestContext, version: int, group_id: str,
                           topics: Any, require_stable: bool = False,
                           member_id: str | None = None,
                           member_epoch: int = -1) -> tuple[ErrorCode, Answer]:
    """``fetch_group``, answered once every write it may show is on the whole ISR of the
    group's ``__consumer_offsets`` partition: a read never shows an offset that a
    coordinator's failover could take back (else the wait's error, as for a write)."""
    error, partitions = fetch_group(ctx, version, group_id, topics, require_stable, member_id,
                                    member_epoch)
    if error != ErrorCode.none:
        return error, partitions
    waited = await ctx.state.group_coordinator.acknowledged_error(group_id, error,
                                                                  offsets=False)
    if waited == ErrorCode.none:
        return error, partitions
    return waited, [] if version >= 2 else [(tp, None, waited) for tp, _, _ in partitions]


def fetch_group(ctx: RequestContext, version: int, group_id: str,
                topics: Any, require_stable: bool = False, member_id: str | None = None,
                member_epoch: int = -1) -> tuple[ErrorCode, Answer]:
    """One group's answer: (group-level error, one entry per partition answered)."""
    requested: list[TopicPartition] | None = None
    if topics is not None:
        requested = [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error, offsets = ctx.state.group_coordinator.fetch_offsets(group_id, requested)
        if error == ErrorCode.none:
            error = ctx.state.group_coordinator.consumer_groups.offset_fetch_error(
                group_id, member_id, member_epoch)
    if error != ErrorCode.none:
        if version >= 2:
            return error, []
        return error, [(tp, None, error) for tp in requested or []]

    def described(topic: str) -> bool:
        return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    if requested is None:  # every committed offset: those of undescribable topics are left out
        requested = [tp for tp in sorted(offsets) if described(tp[0])]
    coordinator = ctx.state.group_coordinator

    def answer(tp: TopicPartition) -> tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]:
        if not described(tp[0]):
            return tp, None, ErrorCode.topic_authorization_failed
        if require_stable and coordinator.has_pending_transactional_offsets(group_id, tp):
            return tp, None, ErrorCode.unstable_offset_commit
        return tp, offsets.get(tp), ErrorCode.none

    return ErrorCode.none, [answer(tp) for tp in requested]


def _topics(partitions: Answer) -> list[dict[str, object]]:
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, index), committed, partition_error in partitions:
        topics.setdefault(topic, []).append({
            "partition_index": index,
            "committed_offset": committed.offset if committed else INVALID_OFFSET,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else NO_METADATA,
            "error_code": partition_error,
        })
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]
