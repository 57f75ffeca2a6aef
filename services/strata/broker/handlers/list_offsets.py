"""ListOffsets v1-v11: offsets by timestamp, and the earliest / latest offsets of partitions.

Per partition (Kafka's ``Partition.fetchOffsetForTimestamp``):

* -1 latest: the last offset a reader of the request's kind may fetch — the high watermark for
  consumers (read_uncommitted), the last stable offset for read_committed (equal to the HW: no
  transactions yet), the log end offset for a request with ``replica_id`` >= 0;
* -2 earliest and -4 earliest-local (v8, KIP-405): the log start offset (no tiered storage, so
  the local log is the whole log);
* -3 max timestamp (KIP-734, v7; handled for any version): the offset and timestamp of the first
  record holding the largest timestamp (storage finds it inside its batch), if it is below the
  last fetchable offset;
* -5 latest-tiered (v9, KIP-1005) and -6 earliest-pending-upload (v11, KIP-1023): offset and
  timestamp -1 (Kafka's answer for a topic without remote storage);
* a timestamp: the first offset whose record timestamp is >= it and below the last fetchable
  offset; if there is none, offset and timestamp -1 (Kafka's UNKNOWN_OFFSET).

v4+ checks ``current_leader_epoch`` (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and answers
the leader epoch of the found offset (-1 when unknown). v6+ are flexible (tagged fields handled
by the codec). v10's ``timeout_ms`` bounds remote-storage reads, which Strata never does: every
answer is immediate. A partition listed twice in one request gets INVALID_REQUEST (Kafka's
rule). A partition the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION; one it has that this
broker does not host (yet, or any more): NOT_LEADER_OR_FOLLOWER. Authorization: Describe on the
topic (or ClusterAction on the Cluster, a replica's right), else TOPIC_AUTHORIZATION_FAILED for
its partitions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.replication.partition import NONE, FetchIsolation, PartitionError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import StorageError

READ_COMMITTED = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    replica_manager = ctx.state.replica_manager
    if request.replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif getattr(request, "isolation_level", 0) == READ_COMMITTED:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    seen = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    cluster_action = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for topic in request.topics:
        partitions = []
        allowed = cluster_action or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                  topic.name)
        for p in topic.partitions:
            answer: dict[str, Any] = {"partition_index": p.partition_index, "error_code": NONE,
                                      "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if not allowed:
                answer["error_code"] = ErrorCode.topic_authorization_failed
                partitions.append(answer)
                continue
            if seen[(topic.name, p.partition_index)] > 1:
                answer["error_code"] = ErrorCode.invalid_request
                partitions.append(answer)
                continue
            epoch = getattr(p, "current_leader_epoch", -1) if version >= 4 else -1
            try:
                partition = replica_manager.get_partition_or_error(topic.name, p.partition_index)
                found = partition.fetch_offset_for_timestamp(p.timestamp, isolation, epoch)
            except (StorageError, PartitionError) as exc:
                answer["error_code"] = exc.error_code
            else:
                if found is not None:
                    answer["timestamp"] = found.timestamp
                    answer["offset"] = found.offset
                    if found.leader_epoch is not None:
                        answer["leader_epoch"] = found.leader_epoch
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return build_response(ApiKey.LIST_OFFSETS, version, topics=topics, throttle_time_ms=0)
