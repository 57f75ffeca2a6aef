"""DescribeCluster (key 60, v0-2, flexible): the cluster id, the controller and the brokers.

What admin tools ask instead of Metadata (KIP-700): ``AdminClient.describe_cluster`` in
librdkafka and the Java client, ``kafka-cluster.sh``. The brokers and controller are the ones
Metadata reports (``BrokerState.live_brokers`` / ``controller_id``). v1 adds
``endpoint_type`` (KIP-919): 1 asks for brokers; 2 asks for controllers, which a broker
refuses with UNSUPPORTED_ENDPOINT_TYPE, as Kafka's brokers do. v2 adds ``include_fenced_brokers``
and each broker's ``is_fenced`` (KIP-1073): the brokers listed are the registered ones, and a
broker whose registration lapsed is no longer registered (``broker_lifecycle``), so none is
fenced and the flag adds no broker. ``cluster_authorized_operations``
is INT32_MIN ("not requested" or no authorizer), as in Metadata.

Authorization: Describe on the Cluster, else CLUSTER_AUTHORIZATION_FAILED;
``cluster_authorized_operations`` from the ACLs when asked.
"""

from __future__ import annotations

from typing import Any, Final

from strata.broker.network.request_context import RequestContext
from strata.broker.security.authorization import authorized_operations
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

BROKER_ENDPOINTS: Final = 1
AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648


async def handle(ctx: RequestContext, request: Any) -> Any:
    ctx.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    state = ctx.state
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINTS)
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(state.authorizer, ctx.principal, ctx.client_host,
                                            ResourceType.CLUSTER)
    fields: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": ErrorCode.none, "error_message": None,
        "endpoint_type": endpoint_type, "cluster_id": state.cluster_id,
        "controller_id": state.controller_id,
        "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                     "is_fenced": False}
                    for b in state.live_brokers(ctx.listener)],
        "cluster_authorized_operations": cluster_ops,
    }
    if endpoint_type != BROKER_ENDPOINTS:
        fields.update(error_code=ErrorCode.unsupported_endpoint_type,
                      error_message=f"endpoint type {endpoint_type} is not served by brokers",
                      controller_id=-1, brokers=[])
    return build_response(ApiKey.DESCRIBE_CLUSTER, ctx.header.api_version, fields)
