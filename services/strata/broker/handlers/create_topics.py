"""CreateTopics (key 19, v2-7), and the one place topics are created (Metadata auto-creates too).

Kafka's rules, per topic, in the order Kafka checks them (each failure answers that topic only):

* a name given twice in one request: INVALID_REQUEST for every occurrence;
* with an authorizer: neither Create on the Cluster nor on the topic: TOPIC_AUTHORIZATION_FAILED;
* an illegal name (``[a-zA-Z0-9._-]``, 1..249 characters, not ``.`` / ``..``) or one colliding
  with an existing topic by ``.`` vs ``_``: INVALID_TOPIC_EXCEPTION;
* a taken name: TOPIC_ALREADY_EXISTS;
* ``num_partitions`` / ``replication_factor`` of -1 take ``num.partitions`` /
  ``default.replication.factor`` (KIP-464); other values below 1: INVALID_PARTITIONS /
  INVALID_REPLICATION_FACTOR; a factor above the number of live brokers:
  INVALID_REPLICATION_FACTOR;
* manual ``assignments`` exclude both counts (INVALID_REQUEST), must cover partitions 0..n-1 once
  each and name only live brokers (INVALID_REPLICA_ASSIGNMENT);
* ``configs``: every name a topic config of ``strata.storage.log_config.TOPIC_CONFIGS`` with a
  valid value, none null: INVALID_CONFIG; the deprecated ``message.format.version`` is accepted
  and ignored with a warning, as Kafka 3.x does (every batch is message format v2 anyway);
* more partition replicas on this broker than it can hold (``partition_capacity``: derived from
  its open file limit, or ``strata.max.partitions.per.broker``): POLICY_VIOLATION, also for
  ``validate_only`` and for Metadata's auto-creation (Strata's own rule).

``validate_only`` runs every check and creates nothing.

The answer (v5+) repeats what was (or, with ``validate_only``, would be) created:
``num_partitions``, ``replication_factor`` and every config of the topic as DescribeConfigs
shows it (value, source, read-only, sensitive: values of sensitive configs are null); without
DescribeConfigs on the topic the configs are left out and ``topic_config_error_code`` (a tagged
field) is TOPIC_AUTHORIZATION_FAILED. v7 adds the new ``topic_id`` (zero for ``validate_only``:
no topic exists). A failed topic gets -1, -1, no configs. A created topic gets a new topic id, is
written to the ``TopicStore`` first (the registry is the truth), then every partition is hosted
as leader at epoch 0 by the ``ReplicaManager`` (creating its log). In a cluster the topic and
its partitions' replicas (placed rack-aware over the live brokers, or as assigned) are written
to the metadata store in one transaction, and each broker hosts its replicas when it sees them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from strata.broker.broker_state import BrokerState
from strata.broker.cluster.replica_placement import PlacementError
from strata.broker.handlers import ApiError
from strata.broker.handlers.describe_configs import describe_topic
from strata.broker.network.request_context import RequestContext
from strata.broker.partition_capacity import (
    PartitionCapacityError,
    check_capacity,
    replicas_here,
)
from strata.broker.quotas.request_quotas import MutationQuota
from strata.broker.topic_store import (
    TopicExistsError,
    TopicRecord,
    colliding_topic,
    invalid_topic_name_reason,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import InvalidConfigError, StorageError
from strata.storage.log_config import LogConfig

logger = logging.getLogger(__name__)

IGNORED_TOPIC_CONFIGS: Final = frozenset({"message.format.version"})
"""Deprecated topic configs Kafka 3.x accepts and ignores (Kafka 4 removed them)."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A validated topic to create (``assignment``: the request's replica lists, if any)."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    assignment: tuple[tuple[int, ...], ...] | None = None


def check_new_topic_name(state: BrokerState, name: str) -> None:
    """INVALID_TOPIC_EXCEPTION / TOPIC_ALREADY_EXISTS for a name that cannot be created."""
    reason = invalid_topic_name_reason(name)
    if reason is not None:
        raise ApiError(ErrorCode.invalid_topic_exception, reason)
    topics = state.topic_store.topics()
    if name in topics:
        raise ApiError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    other = colliding_topic(name, topics)
    if other is not None:
        raise ApiError(ErrorCode.invalid_topic_exception,
                         f"Topic '{name}' collides with existing topic: {other}")


def check_replication_factor(state: BrokerState, replication_factor: int) -> None:
    if replication_factor < 1:
        raise ApiError(ErrorCode.invalid_replication_factor,
                         "Replication factor must be larger than 0, or -1 to use the default "
                         "value.")
    live = len(state.live_broker_ids())
    if replication_factor > live:
        raise ApiError(ErrorCode.invalid_replication_factor,
                         f"Unable to replicate the partition {replication_factor} time(s): The "
                         f"target replication factor of {replication_factor} cannot be reached "
                         f"because only {live} broker(s) are registered.")


def check_assignments(state: BrokerState, assignments: Sequence[Sequence[int]]) -> None:
    """Each partition's replica list: non-empty, no duplicates, only live brokers."""
    for index, brokers in enumerate(assignments):
        if not brokers:
            raise ApiError(ErrorCode.invalid_replica_assignment,
                             f"The manual partition assignment includes an empty replica list "
                             f"for partition {index}.")
        if len(set(brokers)) != len(brokers):
            raise ApiError(ErrorCode.invalid_replica_assignment,
                             f"The manual partition assignment includes the partition {index} "
                             "with duplicate replicas.")
        live = state.live_broker_ids()
        for broker in brokers:
            if broker not in live:
                raise ApiError(ErrorCode.invalid_replica_assignment,
                                 f"The manual partition assignment includes broker {broker}, "
                                 "but no such broker is registered.")


def check_topic_configs(state: BrokerState, configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs as a plain mapping if every one is a valid topic config; else INVALID_CONFIG.

    ``IGNORED_TOPIC_CONFIGS`` are accepted, logged at WARNING and left out (Kafka 3.x's rule)."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise ApiError(ErrorCode.invalid_config,
                             f"Null value not supported for topic configs: {name}")
        if name in IGNORED_TOPIC_CONFIGS:
            logger.warning("Topic configuration %s is deprecated and will be ignored: %s=%s "
                           "(every record batch is written in message format v2)", name, name,
                           value)
            continue
        out[name] = value
    try:
        LogConfig.from_props(out, state.broker_defaults())
    except InvalidConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    return out


def resolve(state: BrokerState, topic: Any) -> TopicSpec:
    """Validate one ``CreatableTopic`` of the request (see the module docstring)."""
    name: str = topic.name
    check_new_topic_name(state, name)
    assignments = sorted(topic.assignments, key=lambda a: int(a.partition_index))
    if assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise ApiError(ErrorCode.invalid_request,
                             "Both numPartitions or replicationFactor and replicasAssignments "
                             "were set. Both cannot be used at the same time.")
        indexes = [int(a.partition_index) for a in assignments]
        if indexes != list(range(len(indexes))):
            raise ApiError(ErrorCode.invalid_replica_assignment,
                             "Partitions should be 0-based and consecutive, got "
                             f"{sorted(indexes)}.")
        replica_lists = [[int(b) for b in a.broker_ids] for a in assignments]
        check_assignments(state, replica_lists)
        partitions = len(assignments)
        replication_factor = len(replica_lists[0])
        if any(len(r) != replication_factor for r in replica_lists):
            raise ApiError(ErrorCode.invalid_replica_assignment,
                             "All partitions should have the same number of replicas.")
    else:
        partitions = int(topic.num_partitions)
        replication_factor = int(topic.replication_factor)
        if partitions == -1:
            partitions = state.config.num_partitions
        if replication_factor == -1:
            replication_factor = state.config.default_replication_factor
        if partitions < 1:
            raise ApiError(ErrorCode.invalid_partitions,
                             "Number of partitions was set to an invalid non-positive value.")
    check_replication_factor(state, replication_factor)
    configs = check_topic_configs(state, {c.name: c.value for c in topic.configs})
    assignment = tuple(tuple(r) for r in replica_lists) if assignments else None
    return TopicSpec(name, partitions, replication_factor, configs, assignment)


def check_topic_capacity(state: BrokerState, spec: TopicSpec) -> None:
    """POLICY_VIOLATION if this broker cannot hold its share of the topic's replicas."""
    new = replicas_here(state.node_id, spec.partitions, spec.replication_factor,
                        len(state.live_broker_ids()), spec.assignment)
    try:
        check_capacity(state, new, f"Topic '{spec.name}' with {spec.partitions} partition(s)")
    except PartitionCapacityError as exc:
        raise ApiError(ErrorCode.policy_violation, str(exc)) from None


async def create_topic(state: BrokerState, spec: TopicSpec) -> TopicRecord:
    """Register the topic, then host its partitions. ``ApiError`` if the name got taken or
    this broker cannot hold the partitions (POLICY_VIOLATION)."""
    check_topic_capacity(state, spec)
    record = TopicRecord.new(spec.name, spec.partitions, spec.replication_factor, spec.configs)
    try:
        if state.cluster is not None:  # every replica's broker hosts it from the metadata
            await state.cluster.topic_store.create_topic(record, spec.assignment)
            return record
        await state.topic_store.create_topic(record)
    except TopicExistsError:
        raise ApiError(ErrorCode.topic_already_exists,
                         f"Topic '{spec.name}' already exists.") from None
    except PlacementError as exc:
        raise ApiError(ErrorCode.invalid_replication_factor, str(exc)) from None
    await host_partitions(state, record, range(record.partitions))
    return record


async def host_partitions(state: BrokerState, record: TopicRecord, indexes: range) -> None:
    """Lead each partition of ``indexes`` at its recorded epoch (creating its log). A single
    broker only: in a cluster the ``MetadataPublisher`` hosts what the metadata assigns.

    The logs are created in a worker thread first (a few ms of file work each: thousands of
    partitions must not stall every other client), then led on the loop."""
    if state.cluster is not None:
        return
    log_manager = state.log_manager
    log_manager.set_topic_config(record.name, record.configs)

    def create_logs() -> None:
        for index in indexes:
            log_manager.get_or_create_log(record.name, index)

    await asyncio.to_thread(create_logs)
    for index in indexes:
        state.replica_manager.make_leader(record.name, index, record.topic_id,
                                          record.leader_epochs[index], configs=record.configs)


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    counts = Counter(t.name for t in request.topics)
    cluster_create = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
    quota = MutationQuota(state.quotas, ctx.principal, ctx.header.client_id,
                          ctx.header.api_key, ctx.header.api_version, state.clock.milliseconds())
    results = []
    for topic in request.topics:
        error, message, spec, record = ErrorCode.none, None, None, None
        try:
            if counts[topic.name] > 1:
                raise ApiError(ErrorCode.invalid_request,
                                 f"Create topics request from client `{ctx.header.client_id}` "
                                 f"contains multiple entries for the following topics: "
                                 f"{topic.name}")
            if not cluster_create and not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC,
                                                        topic.name):
                raise ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            spec = resolve(state, topic)
            check_topic_capacity(state, spec)
            if not request.validate_only and not quota.admit(spec.partitions):
                raise ApiError(ErrorCode.throttling_quota_exceeded,
                               "The throttling quota has been exceeded.")
            if request.validate_only:
                record = TopicRecord.new(spec.name, spec.partitions, spec.replication_factor,
                                         spec.configs)
            else:
                record = await create_topic(state, spec)
        except ApiError as exc:
            error, message = exc.error_code, exc.message
        except StorageError as exc:
            error, message = ErrorCode(exc.error_code), str(exc)
        results.append(topic_result(ctx, topic.name, error, message, record,
                                    created=not request.validate_only))
    ctx.throttle_time_ms = max(ctx.throttle_time_ms, quota.throttle_time_ms())
    return build_response(ApiKey.CREATE_TOPICS, ctx.header.api_version,
                          {"throttle_time_ms": ctx.throttle_time_ms, "topics": results})


def topic_result(ctx: RequestContext, name: str, error: ErrorCode, message: str | None,
                 record: TopicRecord | None, *, created: bool) -> dict[str, Any]:
    """One ``CreatableTopicResult``; v5+ fields as Kafka fills them (see the module docstring)."""
    result: dict[str, Any] = {
        "name": name, "error_code": error, "error_message": message, "topic_id": None,
        "num_partitions": -1, "replication_factor": -1, "configs": [],
        "topic_config_error_code": ErrorCode.none,
    }
    if record is None or error:
        return result
    result.update(num_partitions=record.partitions,
                  replication_factor=record.replication_factor,
                  topic_id=record.topic_id if created else None)
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
        result["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        return result
    result["configs"] = [
        {"name": e.name, "value": None if e.sensitive else e.value, "read_only": e.read_only,
         "config_source": int(e.source), "is_sensitive": e.sensitive}
        for e in describe_topic(ctx.state, record)]
    return result
