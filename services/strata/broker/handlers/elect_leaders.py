"""ElectLeaders (key 43, v0-2): preferred or unclean leader election on demand (KIP-460).

Per partition (every partition when ``topic_partitions`` is null): PREFERRED makes the first
replica leader when it is live and in the ISR (ELECTION_NOT_NEEDED if it leads,
PREFERRED_LEADER_NOT_AVAILABLE otherwise); UNCLEAN elects the first live replica of a partition
without a live leader (ELECTION_NOT_NEEDED if it has one, ELIGIBLE_LEADERS_NOT_AVAILABLE when
no replica is live). A single broker leads everything already: ELECTION_NOT_NEEDED. The change
itself is ``strata.broker.cluster.partition_admin.elect_leader``.

Authorization: Alter on the Cluster, else CLUSTER_AUTHORIZATION_FAILED (top level, and per
partition for v0, which has no top-level error).
"""

from __future__ import annotations

from typing import Any

from strata.broker.cluster.partition_admin import PREFERRED, PartitionAdminError, elect_leader
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    election_type = int(getattr(request, "election_type", PREFERRED))
    if request.topic_partitions is None:
        wanted = [(name, list(range(record.partitions)))
                  for name, record in sorted(state.topic_store.topics().items())]
    else:
        wanted = [(t.topic, [int(p) for p in t.partitions]) for t in request.topic_partitions]
    results = []
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER)
    for topic, indexes in wanted:
        partition_results = []
        for index in indexes:
            error, message = ErrorCode.none, None
            try:
                if not allowed:
                    raise PartitionAdminError(ErrorCode.cluster_authorization_failed,
                                              "Alter on the cluster is not authorized")
                if state.cluster is None:
                    record = state.topic_store.get(topic)
                    if record is None or not 0 <= index < record.partitions:
                        raise PartitionAdminError(ErrorCode.unknown_topic_or_partition,
                                                  f"{topic}-{index} does not exist")
                    raise PartitionAdminError(ErrorCode.election_not_needed,
                                              "a single broker leads every partition")
                await elect_leader(state.cluster, topic, index, election_type)
            except PartitionAdminError as exc:
                error, message = exc.error_code, exc.message
            partition_results.append({"partition_id": index, "error_code": error,
                                      "error_message": message})
        results.append({"topic": topic, "partition_result": partition_results})
    return build_response(ApiKey.ELECT_LEADERS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed,
        "replica_election_results": results})
