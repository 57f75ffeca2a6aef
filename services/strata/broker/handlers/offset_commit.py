"""OffsetCommit v2-v9: store a group's consumed positions in ``__consumer_offsets``.

Per partition, in request order: a topic or partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION (Kafka checks its metadata first); the rest go to
``GroupCoordinator.commit_offsets``, which checks the committer (a member of the current
generation — also while the group prepares a rebalance — or, generation -1 and no member id,
anyone while the group has no members) and appends one batch. Version rules:

* v2-v4 carry ``retention_time_ms``: -1 keeps the broker's ``offsets.retention.minutes``,
  anything else stores an explicit expire timestamp (commit time + retention; value v1);
* v6+ carry each partition's ``committed_leader_epoch`` (-1 = unknown);
* v7 carries ``group_instance_id`` (static members are checked against it);
* v8 is flexible (KIP-482);
* v9 (KIP-848) renames the generation ``generation_id_or_member_epoch``: for a classic group it
  is still the generation, checked as before (Kafka's ``ClassicGroup.validateOffsetCommit``);
  for a consumer group it is the member epoch, which must be the member's current one
  (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; ``ConsumerGroup.validateOffsetCommit``). A member's
  commit (generation >= 0) to a group that does not exist is GROUP_ID_NOT_FOUND from v9, which both
  protocols' clients understand, and ILLEGAL_GENERATION before (Kafka's rule).

The commit timestamp is the broker's clock at the request; null metadata is stored as "".

Authorization: Read on the group (else GROUP_AUTHORIZATION_FAILED for every partition) and
Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import datetime
from typing import Any

from strata.broker.group.classic_group import OffsetAndMetadata, TopicPartition
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

DEFAULT_RETENTION_TIME = -1
GROUP_ID_NOT_FOUND_VERSION = 9
"""The first version answering GROUP_ID_NOT_FOUND for a member's commit to no group."""
_MS = datetime.timedelta(milliseconds=1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    state = ctx.state
    now = state.clock.milliseconds()
    expire: int | None = None
    if version <= 4:
        retention = request.retention_time // _MS
        if retention != DEFAULT_RETENTION_TIME:
            expire = now + retention
    store = state.topic_store
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    group_allowed = ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)
    for topic in request.topics:
        record = store.get(topic.name)
        refused = (ErrorCode.group_authorization_failed if not group_allowed
                   else None if ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
                   else ErrorCode.topic_authorization_failed)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if refused is not None:
                errors[tp] = refused
                continue
            if record is None or not 0 <= p.partition_index < record.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            leader_epoch = p.committed_leader_epoch if version >= 6 else -1
            offsets[tp] = OffsetAndMetadata(p.committed_offset, leader_epoch,
                                            p.committed_metadata or "", now, expire)
    if offsets:
        coordinator = state.group_coordinator
        errors.update(await coordinator.acknowledged(request.group_id, coordinator.commit_offsets(
            request.group_id, request.member_id,
            request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch, offsets,
            unknown_group=(ErrorCode.group_id_not_found if version >= GROUP_ID_NOT_FOUND_VERSION
                           else ErrorCode.illegal_generation)), offsets=True))
    return build_response(ApiKey.OFFSET_COMMIT, version, {
        "throttle_time_ms": 0,
        "topics": [{"name": topic.name,
                    "partitions": [{"partition_index": p.partition_index,
                                    "error_code": errors[(topic.name, p.partition_index)]}
                                   for p in topic.partitions]}
                   for topic in request.topics],
    })
