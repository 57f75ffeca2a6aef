"""ListPartitionReassignments (key 46, v0, flexible): the reassignments in progress (KIP-455).

For each partition asked (every partition when ``topics`` is null) whose registration has
adding or removing replicas: its replicas (the union of old and new), the adding and the
removing ones. Partitions without a reassignment are left out, as Kafka does.

Authorization: Describe on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from strata.broker.cluster.partition_admin import ongoing_reassignments
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    ctx.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    state = ctx.state
    topics = []
    if state.cluster is not None:
        wanted = None if request.topics is None else [
            (t.name, [int(i) for i in t.partition_indexes]) for t in request.topics]
        for name, partitions in ongoing_reassignments(state.cluster, wanted).items():
            topics.append({"name": name, "partitions": [
                {"partition_index": index, "replicas": list(p.replicas),
                 "adding_replicas": list(p.adding), "removing_replicas": list(p.removing)}
                for index, p in partitions]})
    return build_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.header.api_version, {
        "throttle_time_ms": 0, "error_code": ErrorCode.none, "error_message": None,
        "topics": topics})
