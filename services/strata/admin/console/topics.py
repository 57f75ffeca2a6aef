"""``/console/topics``: the topics list (search, create) and a topic's detail page (delete).

Each page is the REST route of the same action, rendered (``strata.admin.routers.topics``):

* ``GET /console/topics?q=``: Metadata — name, partitions, replication factor; ``q`` keeps the
  names containing it; only topics the caller may Describe are listed;
* ``POST /console/topics``: CreateTopics (Cluster or Topic Create), then the new topic's page
  (which shows the partitions as their leaders are elected);
* ``GET /console/topics/{name}?page=``: partitions with leader, replicas, ISR, log start offset
  and high watermark, ``PAGE_SIZE`` partitions a page (ListOffsets only for those, in parallel
  with DescribeConfigs, so a 1,000-partition topic still paints in time), and the configs that
  differ from the defaults (Topic Describe and DescribeConfigs). The delete form is
  rendered only if the caller may Delete the topic;
* ``POST /console/topics/{name}/delete``: DeleteTopics. Topic Delete is checked first (403
  TOPIC_AUTHORIZATION_FAILED whatever the form says), then the confirmation: the form's
  ``confirm`` field must repeat the topic's name (400 otherwise).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Final

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic as KafkaNewTopic
from confluent_kafka.admin import TopicMetadata
from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    TOPIC_NAME_PATTERN,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from strata.admin.problems import ProblemError
from strata.admin.routers.topics import _delete, _list, topic_configs
from strata.client.kafka_admin import topic_of
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TopicName = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249)]
PAGE_SIZE: Final = 100


def _create_only(gateway: KafkaGateway, body: NewTopic) -> None:
    """CreateTopics, without the REST route's describe: the detail page that follows shows
    the partitions as the brokers elect their leaders."""
    kafka = gateway.kafka
    kafka.metadata()
    kafka.create_topic(KafkaNewTopic(body.name, num_partitions=body.partitions,
                                     replication_factor=body.replication_factor))


@router.get("/topics")
async def topics(console: ConsoleDep, q: Annotated[str, Query(max_length=249)] = ""
                 ) -> Response:
    rows = await console.gateway.run(_list, console.gateway, True)
    needle = q.strip()
    rows = [row for row in rows if needle in row.name]
    visible = await console.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          [row.name for row in rows])
    rows = [row for row in rows if row.name in visible]
    return console.render("topics.html", topics=rows, q=needle, section="topics")


@router.post("/topics")
async def create_topic(console: ConsoleDep) -> Response:
    fields = await console.form()
    body = NewTopic(name=fields.get("name", "").strip(),
                    partitions=int_field(fields, "partitions", -1),
                    replication_factor=int_field(fields, "replication_factor", -1))
    await console.access.require_any((AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
                                     (AclOperation.CREATE, ResourceType.TOPIC, body.name))
    await console.gateway.run(_create_only, console.gateway, body)
    return console.redirect(f"{PREFIX}/topics/{body.name}")


def _topic_metadata(gateway: KafkaGateway, name: str) -> TopicMetadata:
    """Metadata of ``name`` alone (a whole-cluster request costs more with many topics); on
    a failure the whole-cluster request, whose errors name the cause (unreachable, ...)."""
    kafka = gateway.kafka
    try:
        metadata = kafka.client.list_topics(topic=name, timeout=gateway.settings.timeout_s)
    except KafkaException:
        metadata = kafka.metadata()
    return topic_of(metadata, name)


Offsets = dict[tuple[str, int], int]


def _partition_rows(name: str, meta: TopicMetadata, shown: list[int], starts: Offsets,
                    ends: Offsets) -> list[PartitionDescription]:
    rows = []
    for p in shown:
        partition = meta.partitions[p]
        rows.append(PartitionDescription(
            partition=p, leader=partition.leader if partition.leader >= 0 else None,
            replicas=list(partition.replicas), isr=list(partition.isrs),
            log_start_offset=starts.get((name, p)), high_watermark=ends.get((name, p))))
    return rows


@router.get("/topics/{name}")
async def topic(console: ConsoleDep, name: TopicName,
                page: Annotated[int, Query(ge=1, le=1_000_000)] = 1) -> Response:
    access, gateway = console.access, console.gateway
    await access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
    meta = await gateway.run(_topic_metadata, gateway, name)
    ids = sorted(meta.partitions)
    pages = max((len(ids) + PAGE_SIZE - 1) // PAGE_SIZE, 1)
    page = min(page, pages)
    shown = ids[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
    keys = [(name, p) for p in shown]
    kafka = gateway.kafka
    starts, ends, configs = await asyncio.gather(
        gateway.run(kafka.list_offsets, keys, "earliest"),
        gateway.run(kafka.list_offsets, keys, "latest"),
        gateway.run(topic_configs, gateway, name, False))
    rows = _partition_rows(name, meta, shown, starts, ends)
    description = TopicDescription(name=name, partitions=rows, configs=configs)
    may_delete = await access.allowed(AclOperation.DELETE, ResourceType.TOPIC, name)
    return console.render("topic.html", topic=description, may_delete=may_delete,
                          partition_count=len(ids), page=page, pages=pages,
                          section="topics")


@router.post("/topics/{name}/delete")
async def delete_topic(console: ConsoleDep, name: TopicName) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.DELETE, ResourceType.TOPIC, name)
    if fields.get("confirm", "") != name:
        raise ProblemError(400, "CONFIRMATION_REQUIRED",
                           f"type the topic's name ({name}) to confirm its deletion")
    await console.gateway.run(_delete, console.gateway, name)
    return console.redirect(f"{PREFIX}/topics")
