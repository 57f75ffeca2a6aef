"""Fetch v4-v11: read partitions (long poll) and answer with zero-copy record slices.

Consumers (``replica_id`` -1) read below the high watermark (read_uncommitted) or the last
stable offset (read_committed, equal to the HW while no transaction can be open); a request
with ``replica_id`` >= 0 (a follower) reads up to the log end offset. ``min_bytes`` /
``max_wait_ms`` make it a long poll woken by appends, bounded by each partition's max bytes and
the request's ``max_bytes`` (at least one batch, KIP-74) — see ``ReplicaManager.fetch_messages``.
The response is encoded by ``fetch_response`` with the records as ``FileSlice``s.

Fetch sessions (KIP-227, v7+) are declined: a full fetch (session epoch -1 or 0) is answered
with ``session_id`` 0, which tells the client no session was created, so it keeps sending full
fetch requests (kafka-python, librdkafka and the Java client all handle this). An incremental
fetch (epoch > 0) names a session we never created: FETCH_SESSION_ID_NOT_FOUND, like Kafka,
after which clients start over with a full fetch. ``forgotten_topics_data`` and ``rack_id``
are ignored.

Authorization (with ``authorizer.class.name``): a follower (``replica_id`` >= 0) needs
ClusterAction on the Cluster, a consumer Read on each topic; a partition refused is
TOPIC_AUTHORIZATION_FAILED (Kafka answers a follower without ClusterAction so, too).

Bad values: a negative ``partition_max_bytes`` (or a negative request ``max_bytes``, which
would leave every partition a negative budget) answers that partition INVALID_REQUEST and is
never read. Kafka passes the size down until ``LogSegment.read`` throws "Invalid max size" and
answers UNKNOWN_SERVER_ERROR with a stack trace in its log; no client sends one, so Strata names
the cause instead and logs nothing.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.connection import RequestContext, Response
from strata.broker.network.fetch_response import encode_fetch_response
from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.replica_manager import FetchPartitionResult, PartitionFetchInfo
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.error_codes import ErrorCode

MIN_VERSION = 4
MAX_VERSION = 11

FETCH_SESSION_ID_NOT_FOUND = 70
READ_COMMITTED = 1
_REFUSED = FetchPartitionResult(ErrorCode.topic_authorization_failed)
_INVALID = FetchPartitionResult(ErrorCode.invalid_request)


async def handle(ctx: RequestContext, request: Any) -> Response:
    version = ctx.header.api_version
    read_committed = request.isolation_level == READ_COMMITTED
    if version >= 7 and request.session_epoch > 0:
        return encode_fetch_response(version, (), read_committed=read_committed,
                                     error_code=FETCH_SESSION_ID_NOT_FOUND)
    if request.replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif read_committed:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    with_epoch = version >= 9
    fetch_infos = []
    # One slot per requested partition, in request order: a result when it is answered without
    # a read (refused, invalid), else None and the replica manager's next result fills it.
    slots: list[FetchPartitionResult | None] = []
    request_invalid = request.max_bytes < 0
    follower_allowed = request.replica_id < 0 or ctx.authorize(AclOperation.CLUSTER_ACTION,
                                                               ResourceType.CLUSTER)
    for topic in request.topics:
        name = topic.topic
        if not follower_allowed or (request.replica_id < 0 and not ctx.authorize(
                AclOperation.READ, ResourceType.TOPIC, name)):
            slots.extend(_REFUSED for _ in topic.partitions)
            continue
        for p in topic.partitions:
            if request_invalid or p.partition_max_bytes < 0:
                slots.append(_INVALID)
                continue
            info = PartitionFetchInfo(p.fetch_offset, p.partition_max_bytes,
                                      p.current_leader_epoch if with_epoch else -1)
            fetch_infos.append(((name, p.partition), info))
            slots.append(None)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    results = [] if not fetch_infos and slots else await ctx.state.replica_manager.fetch_messages(
        fetch_infos,
        max_wait_ms=max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation=isolation,
        replica_id=request.replica_id,
    )
    read = iter(results)
    answers = iter(slots)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            slot = next(answers)
            partitions.append((p.partition, slot if slot is not None else next(read)))
        topics.append((topic.topic, partitions))
    return encode_fetch_response(version, topics, read_committed=read_committed)
