"""``GET /v1/cluster``: cluster id, controller and brokers (DescribeCluster, Kafka's
``kafka-cluster.sh``-like view). Authorization (authentication on): Cluster Describe."""

from __future__ import annotations

from fastapi import APIRouter

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import Broker, Cluster
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix="/v1", tags=["cluster"], responses=PROBLEMS)


def describe_cluster(gateway: KafkaGateway) -> Cluster:
    """DescribeCluster: the brokers sorted by id, the controller (None if there is none)."""
    kafka = gateway.kafka
    kafka.metadata()  # 503 CLUSTER_UNREACHABLE with the address when no broker answers
    answer = kafka.describe_cluster()
    brokers = sorted((Broker(id=n.id, host=n.host, port=n.port, rack=n.rack or None)
                      for n in answer.nodes), key=lambda b: b.id)
    controller = answer.controller.id if answer.controller is not None else None
    if controller is not None and controller < 0:
        controller = None
    return Cluster(cluster_id=answer.cluster_id, controller=controller, brokers=brokers)


@router.get("/cluster", summary="Cluster id, controller and brokers")
async def get_cluster(gateway: GatewayDep, access: AccessDep) -> Cluster:
    await access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    return await gateway.run(describe_cluster, gateway)
