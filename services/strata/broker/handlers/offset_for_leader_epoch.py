"""OffsetForLeaderEpoch (key 23, v2-4): where each leader epoch ended in the leader's log.

Followers (KIP-101) ask it before fetching, to truncate a log that diverged after a leader
change; consumers (KIP-320) ask it to validate their position after the leader epoch in the
metadata moved. Per partition (Kafka's ``Partition.lastOffsetForLeaderEpoch``):

* ``current_leader_epoch`` is checked like Fetch's: older → FENCED_LEADER_EPOCH, newer →
  UNKNOWN_LEADER_EPOCH, -1 skips the check;
* the answer is ``(largest epoch <= leader_epoch, its end offset)`` from the leader-epoch cache:
  the log end offset for the current epoch, the start of the next epoch otherwise, and
  ``(-1, -1)`` (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) when the cache knows nothing of it;
* only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), except for ``replica_id`` -2
  (Kafka's debugging replica id), which may read a follower;
* an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a log on a failed disk is
  KAFKA_STORAGE_ERROR.

Authorization: ClusterAction on the Cluster (a follower's right) or Describe on the topic,
else TOPIC_AUTHORIZATION_FAILED for its partitions (Kafka's rule).

v3 adds ``replica_id`` (-1 from consumers, the follower's node id from brokers); v2 has none
and is treated as a consumer's. v4 is v3 in the flexible encoding.
"""

from __future__ import annotations

from typing import Any, Final

from strata.broker.network.request_context import RequestContext
from strata.broker.replication.partition import NONE, PartitionError, error_code_of
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import StorageError

DEBUGGING_REPLICA_ID: Final = -2
UNDEFINED: Final = -1


class _NotAuthorized(PartitionError):
    error_code = int(ErrorCode.topic_authorization_failed)
    error_name = "TOPIC_AUTHORIZATION_FAILED"


async def handle(ctx: RequestContext, request: Any) -> Any:
    replica_id = getattr(request, "replica_id", -1)
    fetch_only_from_leader = replica_id != DEBUGGING_REPLICA_ID
    replica_manager = ctx.state.replica_manager
    topics = []
    cluster_action = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for topic in request.topics:
        partitions = []
        allowed = cluster_action or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                  topic.topic)
        for p in topic.partitions:
            error, epoch, end_offset = NONE, UNDEFINED, UNDEFINED
            try:
                if not allowed:
                    raise _NotAuthorized
                partition = replica_manager.get_partition_or_error(topic.topic, p.partition)
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch,
                    fetch_only_from_leader=fetch_only_from_leader)
            except (PartitionError, StorageError) as exc:
                error = error_code_of(exc)
            partitions.append({"error_code": error, "partition": p.partition,
                               "leader_epoch": epoch, "end_offset": end_offset})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return build_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.header.api_version,
                          {"throttle_time_ms": 0, "topics": topics})
