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

from collections.abc import Mapping
from typing import Annotated, Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    OffsetSpec,
)
from confluent_kafka.admin import NewPartitions as KafkaNewPartitions
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
from strata.admin.routers.brokers import source_name
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

router = APIRouter(prefix="/v1/topics", tags=["topics"], responses=PROBLEMS)

TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249,
                                description="Topic name.")]
INTERNAL_PREFIX = "__"


def topic_configs(gateway: KafkaGateway, name: str, all_configs: bool) -> dict[str, str | None]:
    """DescribeConfigs of ``name``: every config, or only those that are not defaults."""
    resource = ConfigResource("topic", name)
    futures = gateway.admin.describe_configs([resource],
                                             request_timeout=gateway.settings.timeout_s)
    entries: Mapping[str, ConfigEntry] = gateway.result(futures[resource], f"topic {name!r}")
    return {key: entry.value for key, entry in sorted(entries.items())
            if all_configs or source_name(entry.source) != ConfigSource.DEFAULT_CONFIG.name}


def list_offsets(gateway: KafkaGateway, partitions: list[tuple[str, int]],
                 spec: Any) -> dict[tuple[str, int], int]:
    """ListOffsets of ``partitions`` for one ``OffsetSpec``."""
    if not partitions:
        return {}
    futures = gateway.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                         request_timeout=gateway.settings.timeout_s)
    return {(tp.topic, tp.partition):
            gateway.result(future, f"partition {tp.topic}-{tp.partition}").offset
            for tp, future in futures.items()}


def earliest() -> Any:
    return OffsetSpec.earliest()  # type: ignore[no-untyped-call]


def latest() -> Any:
    return OffsetSpec.latest()  # type: ignore[no-untyped-call]


def describe_topic(gateway: KafkaGateway, name: str, all_configs: bool = False
                   ) -> TopicDescription:
    topic = gateway.topic(name)
    ids = sorted(topic.partitions)
    keys = [(name, p) for p in ids]
    starts = list_offsets(gateway, keys, earliest())
    ends = list_offsets(gateway, keys, latest())
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
    metadata = gateway.metadata()
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
    gateway.metadata()
    futures = gateway.admin.create_topics(
        [KafkaNewTopic(body.name, num_partitions=body.partitions,
                       replication_factor=body.replication_factor, config=dict(body.configs))],
        request_timeout=gateway.settings.timeout_s)
    gateway.result(futures[body.name], f"topic {body.name!r}")
    return describe_topic(gateway, body.name)


def _delete(gateway: KafkaGateway, name: str) -> None:
    gateway.topic(name)
    futures = gateway.admin.delete_topics([name], request_timeout=gateway.settings.timeout_s)
    gateway.result(futures[name], f"topic {name!r}")


def _alter_configs(gateway: KafkaGateway, name: str, patch: ConfigPatch) -> TopicConfigs:
    gateway.topic(name)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in patch.set.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in dict.fromkeys(patch.delete)]
    resource = ConfigResource("topic", name, incremental_configs=entries)
    futures = gateway.admin.incremental_alter_configs(
        [resource], request_timeout=gateway.settings.timeout_s)
    gateway.result(futures[resource], f"topic {name!r}")
    return TopicConfigs(name=name, configs=topic_configs(gateway, name, all_configs=False))


def _add_partitions(gateway: KafkaGateway, name: str, body: NewPartitions) -> TopicDescription:
    gateway.topic(name)
    futures = gateway.admin.create_partitions([KafkaNewPartitions(name, body.count)],
                                              request_timeout=gateway.settings.timeout_s)
    gateway.result(futures[name], f"topic {name!r}")
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
