"""``GET /v1/brokers`` and ``GET /v1/brokers/{id}``: the live brokers and one broker's configs
(DescribeCluster, DescribeConfigs on the BROKER resource).

Authorization (authentication on): the list needs Cluster Describe, a broker's configs Cluster
DescribeConfigs (Kafka checks DescribeConfigs of a broker on the Cluster resource)."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka.admin import ConfigEntry
from fastapi import APIRouter, Path

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import Broker, BrokerDescription, ConfigValue
from strata.admin.problems import ProblemError
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.admin.routers.cluster import describe_cluster
from strata.client.kafka_admin import config_source_name
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix="/v1", tags=["brokers"], responses=PROBLEMS)


def config_values(entries: Mapping[str, ConfigEntry]) -> dict[str, ConfigValue]:
    return {key: ConfigValue(value=entry.value, source=config_source_name(entry.source),
                             read_only=bool(entry.is_read_only),
                             sensitive=bool(entry.is_sensitive))
            for key, entry in sorted(entries.items())}


def describe_broker(gateway: KafkaGateway, broker_id: int) -> BrokerDescription:
    brokers = {b.id: b for b in describe_cluster(gateway).brokers}
    broker = brokers.get(broker_id)
    if broker is None:
        raise ProblemError.kafka("BROKER_NOT_FOUND", f"no live broker has id {broker_id}")
    entries = gateway.kafka.broker_configs(broker_id)
    return BrokerDescription(**broker.model_dump(), configs=config_values(entries))


@router.get("/brokers", summary="Live brokers")
async def list_brokers(gateway: GatewayDep, access: AccessDep) -> list[Broker]:
    await access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    cluster = await gateway.run(describe_cluster, gateway)
    return cluster.brokers


@router.get("/brokers/{broker_id}", summary="One broker and its configs")
async def get_broker(gateway: GatewayDep, access: AccessDep,
                     broker_id: int = Path(ge=0, le=2**31 - 1)) -> BrokerDescription:
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
    return await gateway.run(describe_broker, gateway, broker_id)
