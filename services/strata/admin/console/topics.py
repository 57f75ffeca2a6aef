"""``/console/topics``: the topics list (search, create) and a topic's detail page (delete).

Each page is the REST route of the same action, rendered (``strata.admin.routers.topics``):

* ``GET /console/topics?q=``: Metadata — name, partitions, replication factor; ``q`` keeps the
  names containing it; only topics the caller may Describe are listed;
* ``POST /console/topics``: CreateTopics (Cluster or Topic Create), then the new topic's page
  (which shows the partitions as their leaders are elected);
* ``GET /console/topics/{name}``: partitions with leader, replicas, ISR, log start offset and
  high watermark, and the configs that differ from the defaults (Topic Describe and
  DescribeConfigs). The delete form is rendered only if the caller may Delete the topic;
* ``POST /console/topics/{name}/delete``: DeleteTopics. Topic Delete is checked first (403
  TOPIC_AUTHORIZATION_FAILED whatever the form says), then the confirmation: the form's
  ``confirm`` field must repeat the topic's name (400 otherwise).
"""

from __future__ import annotations

from typing import Annotated

from confluent_kafka.admin import NewTopic as KafkaNewTopic
from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import TOPIC_NAME_PATTERN, NewTopic
from strata.admin.problems import ProblemError
from strata.admin.routers.topics import _delete, _list, describe_topic
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TopicName = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249)]


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
    access = console.access
    rows = await console.gateway.run(_list, console.gateway, True)
    needle = q.strip()
    rows = [row for row in rows if needle in row.name]
    if not access.unrestricted:
        rows = [row for row in rows
                if await access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, row.name)]
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


@router.get("/topics/{name}")
async def topic(console: ConsoleDep, name: TopicName) -> Response:
    access = console.access
    await access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
    description = await console.gateway.run(describe_topic, console.gateway, name, False)
    may_delete = await access.allowed(AclOperation.DELETE, ResourceType.TOPIC, name)
    return console.render("topic.html", topic=description, may_delete=may_delete,
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
