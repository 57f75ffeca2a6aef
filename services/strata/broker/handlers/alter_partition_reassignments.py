"""AlterPartitionReassignments (key 45, v0, flexible): move partitions to other brokers (KIP-455).

Per partition: ``replicas`` starts a reassignment to that list (INVALID_REPLICA_ASSIGNMENT for
an empty list, duplicates or unregistered brokers), null cancels one in progress
(NO_REASSIGNMENT_IN_PROGRESS when there is none); UNKNOWN_TOPIC_OR_PARTITION for a partition
that does not exist. The new replicas are hosted and fetch at once; the controller completes
the move when they are in the ISR. A single broker (no ``metadata.store``) has nowhere to move
partitions: every partition is answered INVALID_REPLICA_ASSIGNMENT unless the target is itself.

Authorization: Alter on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from strata.broker.cluster.partition_admin import PartitionAdminError, alter_reassignment
from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response


async def handle(ctx: RequestContext, request: Any) -> Any:
    ctx.require(AclOperation.ALTER, ResourceType.CLUSTER)
    state = ctx.state
    responses = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            index = int(partition.partition_index)
            error, message = ErrorCode.none, None
            try:
                if state.cluster is None:
                    raise PartitionAdminError(
                        ErrorCode.invalid_replica_assignment,
                        "a single broker cannot reassign partitions (no metadata.store)")
                await alter_reassignment(state.cluster, topic.name, index,
                                         None if partition.replicas is None
                                         else [int(r) for r in partition.replicas])
            except PartitionAdminError as exc:
                error, message = exc.error_code, exc.message
            partitions.append({"partition_index": index, "error_code": error,
                               "error_message": message})
        responses.append({"name": topic.name, "partitions": partitions})
    return build_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.header.api_version, {
        "throttle_time_ms": 0, "error_code": ErrorCode.none, "error_message": None,
        "responses": responses})
