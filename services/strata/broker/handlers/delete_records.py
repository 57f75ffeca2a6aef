"""DeleteRecords v0-v2: move partitions' log start offsets up (the AdminClient's deleteRecords).

v2 is v1 in the flexible encoding.

Per partition: ``offset`` -1 means the high watermark; an offset above the HW (or another
negative one) is OFFSET_OUT_OF_RANGE; an offset below the current log start offset changes
nothing on the leader. The answer's ``low_watermark`` is the partition's low watermark: the
smallest log start offset of the leader and its followers on live brokers, as their fetches
report it (-1 with an error).
A topic whose ``cleanup.policy`` lacks ``delete`` refuses with POLICY_VIOLATION, an internal topic
(``__consumer_offsets``, ``__transaction_state``) with INVALID_TOPIC_EXCEPTION: only their
coordinators move their log start (Kafka's rules, ``ReplicaManager.deleteRecordsOnLocalLog``).
Whole segments below the new log start offset are deleted at once; readers already holding them
are not disturbed (``Log`` keeps deleted files open for ``file.delete.delay.ms``).

Authorization: Delete on the topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.

The leader moves its log start offset at once; as Kafka's ``DelayedDeleteRecords``, the answer
waits until the low watermark reached the offset asked for — every live follower learned the
new log start from a Fetch response, moved its own and reported it in its next fetch — or until
the request's ``timeout_ms``, after which the partitions still short are REQUEST_TIMED_OUT
(``strata.broker.replication.delayed_delete_records``). A partition without followers (a single
broker, replication factor 1) is answered at once.
"""

from __future__ import annotations

from typing import Any

from strata.broker.handlers.metadata import INTERNAL_TOPICS
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = {t.name for t in request.topics
               if ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name)}
    writable = allowed - INTERNAL_TOPICS
    entries = [((t.name, p.partition_index), p.offset)
               for t in request.topics if t.name in writable for p in t.partitions]
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    results = iter(await ctx.state.replica_manager.delete_records(entries, timeout_ms))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name not in allowed:
                partitions.append({"partition_index": p.partition_index, "low_watermark": -1,
                                   "error_code": ErrorCode.topic_authorization_failed})
                continue
            if topic.name in INTERNAL_TOPICS:
                partitions.append({"partition_index": p.partition_index, "low_watermark": -1,
                                   "error_code": ErrorCode.invalid_topic_exception})
                continue
            result = next(results)
            partitions.append({"partition_index": p.partition_index,
                               "low_watermark": result.low_watermark,
                               "error_code": result.error_code})
        topics.append({"name": topic.name, "partitions": partitions})
    return build_response(ApiKey.DELETE_RECORDS, ctx.header.api_version, topics=topics,
                          throttle_time_ms=0)
