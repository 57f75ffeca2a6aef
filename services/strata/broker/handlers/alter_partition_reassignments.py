"""AlterPartitionReassignments (key 45, v0-1, flexible): move partitions to other brokers (KIP-455).

Per partition: ``replicas`` starts a reassignment to that list (INVALID_REPLICA_ASSIGNMENT for
an empty list, duplicates or unregistered brokers), null cancels one in progress
(NO_REASSIGNMENT_IN_PROGRESS when there is none); UNKNOWN_TOPIC_OR_PARTITION for a partition
that does not exist. The new replicas are hosted and fetch at once; the controller completes
the move when they are in the ISR. A single broker (no ``metadata.store``) has nowhere to move
partitions: every partition is answered INVALID_REPLICA_ASSIGNMENT unless the target is itself.

v1 adds ``allow_replication_factor_change`` (KIP-860, true by default, echoed in the answer):
when false, a target with another number of replicas than the partition has now (its replicas
minus those being added) is INVALID_REPLICATION_FACTOR, as in Kafka.

Authorization: Alter on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from strata.broker.cluster.cluster import Cluster
from strata.broker.cluster.partition_admin import PartitionAdminError, alter_reassignment
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    ctx.require(AclOperation.ALTER, ResourceType.CLUSTER)
    state = ctx.state
    responses = []
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
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
                if partition.replicas is not None and not allow_rf_change:
                    check_replication_factor_kept(state.cluster, topic.name, index,
                                                  len(partition.replicas))
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
        "responses": responses, "allow_replication_factor_change": allow_rf_change})


def check_replication_factor_kept(cluster: Cluster, topic: str, index: int, target: int) -> None:
    """INVALID_REPLICATION_FACTOR if ``target`` replicas is not the partition's current count
    (an unknown partition is left to ``alter_reassignment`` to refuse)."""
    for i, p in cluster.image.topic_partitions(topic):
        if i != index:
            continue
        current = len([r for r in p.replicas if r not in p.adding])
        if current != target:
            raise PartitionAdminError(
                ErrorCode.invalid_replication_factor,
                f"The replication factor is changed from {current} to {target} but "
                "allowReplicationFactorChange is false")

