"""``/console/topics``: the topics list (search, create) and a topic's page (configs, partitions,
delete).

Each page is the REST route of the same action, rendered (``strata.admin.routers.topics``):

* ``GET /console/topics?q=``: Metadata — name, partitions, replication factor; ``q`` keeps the
  names containing it; only topics the caller may Describe are listed; each topic's size
  (bytes on disk over its replicas), its configs that differ from the defaults (one
  DescribeConfigs call for every listed topic) and messages in per second from the console's
  ``MetricsSampler`` (its latest DescribeLogDirs and the brokers' metrics; the first page
  waits up to ``FIRST_SAMPLE_WAIT_S`` for a first sample);
* ``POST /console/topics``: CreateTopics (Cluster or Topic Create), then the new topic's page
  (which shows the partitions as their leaders are elected);
* ``GET /console/topics/{name}?page=``: partitions with leader, replicas, ISR, log start offset
  and high watermark, ``PAGE_SIZE`` partitions a page (ListOffsets only for those, in parallel
  with DescribeConfigs, so a 1,000-partition topic still paints in time), and the configs that
  differ from the defaults (Topic Describe and DescribeConfigs), the topic's and each shown
  partition's size, its rates and their charts. A topic the metadata does not show is looked
  for again for up to ``UNKNOWN_TOPIC_WAIT_S`` before the 404 (a topic just created reaches
  every broker a moment after CreateTopics answered). The forms are rendered only if the caller
  may do what they do (Delete, AlterConfigs, Alter);
* ``POST /console/topics/{name}/configs``: IncrementalAlterConfigs — ``set_name`` =
  ``set_value``, or ``delete`` one override — with the REST route's ``_alter_configs`` and
  right (Topic AlterConfigs); ``POST /console/topics/{name}/partitions``: CreatePartitions to
  the total ``count`` (``_add_partitions``, Topic Alter). A refusal (INVALID_CONFIG,
  INVALID_PARTITIONS, a bad form: 422) is shown on the topic page with its status;
* ``POST /console/topics/{name}/delete``: DeleteTopics. Topic Delete is checked first (403
  TOPIC_AUTHORIZATION_FAILED whatever the form says), then the confirmation: the form's
  ``confirm`` field must repeat the topic's name (400 otherwise).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from typing import Annotated, Final

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource, TopicMetadata
from confluent_kafka.admin import NewTopic as KafkaNewTopic
from fastapi import APIRouter, Path, Query
from fastapi.responses import Response
from pydantic import ValidationError

from strata.admin.console.charts import sampler_of
from strata.admin.console.sampler import MetricsSampler
from strata.admin.console.settings import ConsoleSettings
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    MAX_PARTITIONS,
    TOPIC_NAME_PATTERN,
    ConfigPatch,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from strata.admin.problems import ProblemError
from strata.admin.routers.topics import (
    _add_partitions,
    _alter_configs,
    _delete,
    _list,
    require_topic,
    topic_configs,
)
from strata.client.kafka_admin import config_source_name, topic_of
from strata.client.kafka_errors import KafkaClientError
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TopicName = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249)]
PAGE_SIZE: Final = 100
FIRST_SAMPLE_WAIT_S: Final = 2.0
# How long a topic page looks for a topic the metadata does not (yet) show, and how often.
UNKNOWN_TOPIC_WAIT_S: Final = 1.0
UNKNOWN_TOPIC_BACKOFF_S: Final = 0.05
MAX_OVERRIDE_TOPICS: Final = 1_000  # the list describes the configs of at most so many
# Kafka's topic configs, offered as suggestions in the edit form (the broker decides).
TOPIC_CONFIG_NAMES: Final = (
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
    "max.message.bytes", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable")


def _create_only(gateway: KafkaGateway, body: NewTopic) -> None:
    """CreateTopics, without the REST route's describe: the detail page that follows shows
    the partitions as the brokers elect their leaders."""
    kafka = gateway.kafka
    kafka.metadata()
    kafka.create_topic(KafkaNewTopic(body.name, num_partitions=body.partitions,
                                     replication_factor=body.replication_factor))


def topic_overrides(gateway: KafkaGateway, names: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's configs that differ from the defaults (the topic page's rule), for every
    one of ``names`` in one DescribeConfigs call; a topic whose answer failed (deleted
    meanwhile...) is left out."""
    if not names:
        return {}
    kafka = gateway.kafka
    resources = [ConfigResource("topic", name) for name in names]
    futures = kafka.client.describe_configs(resources, request_timeout=kafka.timeout_s)
    out: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=kafka.timeout_s)
        except (KafkaException, concurrent.futures.TimeoutError):
            continue
        out[resource.name] = {
            key: "" if entry.value is None else str(entry.value)
            for key, entry in sorted(entries.items())
            if config_source_name(entry.source) != ConfigSource.DEFAULT_CONFIG.name}
    return out


@router.get("/topics")
async def topics(console: ConsoleDep, q: Annotated[str, Query(max_length=249)] = ""
                 ) -> Response:
    sampler = sampler_of(console)
    rows, _ = await asyncio.gather(console.gateway.run(_list, console.gateway, True),
                                   sampler.first_sample(FIRST_SAMPLE_WAIT_S))
    needle = q.strip()
    rows = [row for row in rows if needle in row.name]
    visible = await console.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          [row.name for row in rows])
    rows = [row for row in rows if row.name in visible]
    overrides = await console.gateway.run(
        topic_overrides, console.gateway,
        [row.name for row in rows if not row.internal][:MAX_OVERRIDE_TOPICS])
    store = sampler.store
    rates = {row.name: store.latest(f"topic:{row.name}:records_in") for row in rows}
    return console.render("topics.html", topics=rows, q=needle, section="topics",
                          sizes=sampler.topic_sizes, rates=rates, overrides=overrides)


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


def _topic_metadata(gateway: KafkaGateway, name: str, *,
                    monotonic: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> TopicMetadata:
    """Metadata of ``name`` alone (a whole-cluster request costs more with many topics); on
    a failure the whole-cluster request, whose errors name the cause (unreachable, ...).

    A topic the answering broker does not know is asked for again every
    ``UNKNOWN_TOPIC_BACKOFF_S`` for up to ``UNKNOWN_TOPIC_WAIT_S``: a topic just created (the
    create form's redirect) is in every broker's metadata only a moment after CreateTopics
    answered, as in Kafka, and the request may reach one still behind."""
    kafka = gateway.kafka
    deadline = monotonic() + UNKNOWN_TOPIC_WAIT_S
    while True:
        try:
            metadata = kafka.client.list_topics(topic=name, timeout=gateway.settings.timeout_s)
        except KafkaException:
            metadata = kafka.metadata()
        try:
            return topic_of(metadata, name)
        except KafkaClientError as exc:
            if (exc.name != "UNKNOWN_TOPIC_OR_PARTITION"
                    or monotonic() + UNKNOWN_TOPIC_BACKOFF_S > deadline):
                raise
        sleep(UNKNOWN_TOPIC_BACKOFF_S)


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


async def render_topic(console: ConsoleDep, name: str, page: int = 1,
                       error: ProblemError | None = None, notice: str = "") -> Response:
    """The topic page; ``error``: a refused change shown above its form (with the status the
    REST route answers), ``notice``: a change that was made."""
    access, gateway = console.access, console.gateway
    await access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
    sampler = sampler_of(console)
    meta, _ = await asyncio.gather(gateway.run(_topic_metadata, gateway, name),
                                   sampler.first_sample(FIRST_SAMPLE_WAIT_S))
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
    store = sampler.store
    settings: ConsoleSettings = console.request.app.state.console_settings
    return console.render(
        "topic.html", status=error.status if error is not None else 200,
        topic=description, partition_count=len(ids), page=page, pages=pages,
        may_delete=await access.allowed(AclOperation.DELETE, ResourceType.TOPIC, name),
        may_alter_configs=await access.allowed(AclOperation.ALTER_CONFIGS,
                                               ResourceType.TOPIC, name),
        may_alter=await access.allowed(AclOperation.ALTER, ResourceType.TOPIC, name),
        size=sampler.topic_sizes.get(name), partition_sizes=_partition_sizes(sampler, name),
        records_in=store.latest(f"topic:{name}:records_in"),
        bytes_in=store.latest(f"topic:{name}:bytes_in"),
        config_names=TOPIC_CONFIG_NAMES, error=error, notice=notice,
        grafana=settings.grafana_link("topics", topic=name), section="topics")


def _partition_sizes(sampler: MetricsSampler, name: str) -> dict[int, int]:
    """Bytes on disk per partition of ``name`` (every replica), from the latest sample."""
    out: dict[int, int] = {}
    latest = sampler.latest_log_dirs
    for log_dir in latest.dirs if latest is not None else ():
        for (topic, partition), size in log_dir.sizes.items():
            if topic == name:
                out[partition] = out.get(partition, 0) + size
    return out


@router.get("/topics/{name}")
async def topic(console: ConsoleDep, name: TopicName,
                page: Annotated[int, Query(ge=1, le=1_000_000)] = 1) -> Response:
    return await render_topic(console, name, page)


@router.post("/topics/{name}/configs")
async def alter_configs(console: ConsoleDep, name: TopicName) -> Response:
    """IncrementalAlterConfigs: ``set_name``/``set_value`` sets one config, ``delete`` removes
    one override (back to the default); the broker's refusal (INVALID_CONFIG...) is shown on
    the topic page with its message."""
    fields = await console.form()
    await require_topic(console.access, AclOperation.ALTER_CONFIGS, name)
    key, value = fields.get("set_name", "").strip(), fields.get("set_value", "").strip()
    removed = fields.get("delete", "").strip()
    try:
        patch = ConfigPatch(set={key: value} if key else {},
                            delete=[removed] if removed else [])
    except ValidationError as exc:
        message = exc.errors()[0]["msg"] if exc.errors() else "invalid change"
        return await render_topic(console, name, error=ProblemError(
            422, "VALIDATION_ERROR", message))
    try:
        await console.gateway.run(_alter_configs, console.gateway, name, patch)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await render_topic(console, name, error=exc)
    done = f"{key} set to {value}" if key else f"{removed} reset to its default"
    return await render_topic(console, name, notice=done)


@router.post("/topics/{name}/partitions")
async def add_partitions(console: ConsoleDep, name: TopicName) -> Response:
    """CreatePartitions to a new total (``count``); fewer than now is Kafka's
    INVALID_PARTITIONS, shown on the topic page."""
    fields = await console.form()
    await require_topic(console.access, AclOperation.ALTER, name)
    count = int_field(fields, "count")
    if count is None or not 1 <= count <= MAX_PARTITIONS:
        return await render_topic(console, name, error=ProblemError(
            422, "VALIDATION_ERROR", f"count: a whole number from 1 to {MAX_PARTITIONS}"))
    try:
        await console.gateway.run(_add_partitions, console.gateway, name,
                                  NewPartitions(count=count))
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await render_topic(console, name, error=exc)
    return await render_topic(console, name, notice=f"{name} has {count} partitions now")


@router.post("/topics/{name}/delete")
async def delete_topic(console: ConsoleDep, name: TopicName) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.DELETE, ResourceType.TOPIC, name)
    if fields.get("confirm", "") != name:
        raise ProblemError(400, "CONFIRMATION_REQUIRED",
                           f"type the topic's name ({name}) to confirm its deletion")
    await console.gateway.run(_delete, console.gateway, name)
    return console.redirect(f"{PREFIX}/topics")
