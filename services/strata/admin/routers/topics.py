"""``/v1/topics``: list, create, describe, delete topics; alter configs; add partitions.

Each route is one or two Kafka admin requests (the same ones ``strata topic`` makes):

* ``GET /v1/topics``: Metadata — name, partition count, replication factor, internal;
* ``POST /v1/topics``: CreateTopics (-1 = the broker's default, KIP-464) → 201 and the
  description; TOPIC_ALREADY_EXISTS → 409;
* ``GET /v1/topics/{name}``: Metadata (leader, replicas, isr), ListOffsets (log start offset,
  high watermark) and DescribeConfigs — the shape docs/admin-api.md promises; ``configs`` holds the
  topic's non-default configs unless ``all_configs=true`` (like ``kafka-topics.sh --describe``);
* ``DELETE /v1/topics/{name}``: DeleteTopics → 204;
* ``PATCH /v1/topics/{name}/configs``: IncrementalAlterConfigs (``set``, ``delete``);
* ``POST /v1/topics/{name}/partitions``: CreatePartitions (``count``: the new total).

An unknown topic is 404 UNKNOWN_TOPIC_OR_PARTITION, checked with Metadata first so no request
waits for a topic that is not there.

Authorization (with authentication on; the Kafka request each route makes): the list shows only
topics the caller may Describe (Kafka's Metadata rule); create needs Cluster or Topic Create;
describe needs Topic Describe and DescribeConfigs; delete Topic Delete; configs Topic
AlterConfigs; partitions Topic Alter. Rights are checked before the topic's existence, so a
caller without them cannot probe which topics exist.
"""

from __future__ import annotations

from typing import Annotated

from confluent_kafka.admin import ConfigSource
from confluent_kafka.admin import NewTopic as KafkaNewTopic
from fastapi import APIRouter, Path, Query, Response

from strata.admin.authorization import Access
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    TOPIC_NAME_PATTERN,
    ConfigPatch,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicConfigs,
    TopicDescription,
    TopicSummary,
)
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.client.kafka_admin import config_source_name
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

router = APIRouter(prefix="/v1/topics", tags=["topics"], responses=PROBLEMS)

TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249,
                                description="Topic name.")]
INTERNAL_PREFIX = "__"


def topic_configs(gateway: KafkaGateway, name: str, all_configs: bool) -> dict[str, str | None]:
    """DescribeConfigs of ``name``: every config, or only those that are not defaults."""
    entries = gateway.kafka.topic_configs(name)
    return {key: entry.value for key, entry in sorted(entries.items())
            if all_configs or config_source_name(entry.source) != ConfigSource.DEFAULT_CONFIG.name}


def describe_topic(gateway: KafkaGateway, name: str, all_configs: bool = False
                   ) -> TopicDescription:
    kafka = gateway.kafka
    topic = kafka.topic(name)
    ids = sorted(topic.partitions)
    keys = [(name, p) for p in ids]
    starts = kafka.list_offsets(keys, "earliest")
    ends = kafka.list_offsets(keys, "latest")
    partitions = []
    for p in ids:
        meta = topic.partitions[p]
        partitions.append(PartitionDescription(
            partition=p, leader=meta.leader if meta.leader >= 0 else None,
            replicas=list(meta.replicas), isr=list(meta.isrs),
            log_start_offset=starts.get((name, p)), high_watermark=ends.get((name, p))))
    return TopicDescription(name=name, partitions=partitions,
                            configs=topic_configs(gateway, name, all_configs))


def _list(gateway: KafkaGateway, include_internal: bool) -> list[TopicSummary]:
    metadata = gateway.kafka.metadata()
    rows = []
    for name in sorted(metadata.topics):
        internal = name.startswith(INTERNAL_PREFIX)
        if internal and not include_internal:
            continue
        topic = metadata.topics[name]
        factor = max((len(p.replicas) for p in topic.partitions.values()), default=0)
        rows.append(TopicSummary(name=name, partitions=len(topic.partitions),
                                 replication_factor=factor, internal=internal))
    return rows


def _create(gateway: KafkaGateway, body: NewTopic) -> TopicDescription:
    kafka = gateway.kafka
    kafka.metadata()
    kafka.create_topic(KafkaNewTopic(body.name, num_partitions=body.partitions,
                                     replication_factor=body.replication_factor,
                                     config=dict(body.configs)))
    return describe_topic(gateway, body.name)


def _delete(gateway: KafkaGateway, name: str) -> None:
    kafka = gateway.kafka
    kafka.topic(name)
    kafka.delete_topic(name)


def _alter_configs(gateway: KafkaGateway, name: str, patch: ConfigPatch) -> TopicConfigs:
    kafka = gateway.kafka
    kafka.topic(name)
    kafka.alter_topic_configs(name, patch.set, patch.delete)
    return TopicConfigs(name=name, configs=topic_configs(gateway, name, all_configs=False))


def _add_partitions(gateway: KafkaGateway, name: str, body: NewPartitions) -> TopicDescription:
    kafka = gateway.kafka
    kafka.topic(name)
    kafka.create_partitions(name, body.count)
    return describe_topic(gateway, name)


async def require_topic(access: Access, operation: AclOperation, name: str) -> None:
    await access.require(operation, ResourceType.TOPIC, name)


@router.get("", summary="Topics with partition count and replication factor")
async def list_topics(gateway: GatewayDep, access: AccessDep,
                      include_internal: bool = Query(True, description="List __* topics too.")
                      ) -> list[TopicSummary]:
    rows = await gateway.run(_list, gateway, include_internal)
    if access.unrestricted:
        return rows
    return [row for row in rows
            if await access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, row.name)]


@router.post("", status_code=201, summary="Create a topic")
async def create_topic(gateway: GatewayDep, access: AccessDep,
                       body: NewTopic) -> TopicDescription:
    await access.require_any((AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
                             (AclOperation.CREATE, ResourceType.TOPIC, body.name))
    return await gateway.run(_create, gateway, body)


@router.get("/{name}", summary="Partitions (leader, replicas, isr, offsets) and configs")
async def get_topic(gateway: GatewayDep, access: AccessDep, name: TopicPath,
                    all_configs: bool = Query(False, description="Defaults too.")
                    ) -> TopicDescription:
    await require_topic(access, AclOperation.DESCRIBE, name)
    await require_topic(access, AclOperation.DESCRIBE_CONFIGS, name)
    return await gateway.run(describe_topic, gateway, name, all_configs)


@router.delete("/{name}", status_code=204, response_class=Response, summary="Delete a topic")
async def delete_topic(gateway: GatewayDep, access: AccessDep, name: TopicPath) -> Response:
    await require_topic(access, AclOperation.DELETE, name)
    await gateway.run(_delete, gateway, name)
    return Response(status_code=204)


@router.patch("/{name}/configs", summary="Set or delete topic configs")
async def alter_topic_configs(gateway: GatewayDep, access: AccessDep, name: TopicPath,
                              body: ConfigPatch) -> TopicConfigs:
    await require_topic(access, AclOperation.ALTER_CONFIGS, name)
    return await gateway.run(_alter_configs, gateway, name, body)


@router.post("/{name}/partitions", summary="Grow the partition count to a new total")
async def create_partitions(gateway: GatewayDep, access: AccessDep, name: TopicPath,
                            body: NewPartitions) -> TopicDescription:
    await require_topic(access, AclOperation.ALTER, name)
    return await gateway.run(_add_partitions, gateway, name, body)
