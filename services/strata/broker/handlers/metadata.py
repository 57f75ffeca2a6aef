"""Metadata (key 3, v0-13): brokers, controller, cluster id, and topics with their partitions.

Answers from the ``TopicStore`` (which topics exist) and the ``ReplicaManager`` (what each hosted
partition looks like). Kafka's rules (``KafkaApis.handleTopicMetadataRequest``):

* which topics: v0 with an empty list, or v1+ with a null list, means every topic; otherwise the
  names asked for, in order (duplicates answered once);
* topic ids (KIP-516): every topic carries its ``topic_id`` from v10 (the zero UUID when it does
  not exist or may not be described). Asking by id (a non-zero ``topic_id``, or a null name) is
  refused at v10-11, where Kafka never implemented it: the whole request is answered as Kafka's
  ``MetadataRequest.getErrorResponse`` answers an InvalidRequestException — every topic asked
  for with INVALID_REQUEST, its name ("" for null) and id, no partitions. From v12 ids are
  resolved (names then ignored): an unknown id is UNKNOWN_TOPIC_ID with a null name, an id the
  principal may not Describe is TOPIC_AUTHORIZATION_FAILED with the id and a null name (ids are
  not secret; names are);
* an unknown name: INVALID_TOPIC_EXCEPTION if it is not a legal name; else, when
  ``auto.create.topics.enable`` is on and the request allows it (``allow_auto_topic_creation``,
  v4+; always before v4), the topic is created with the broker defaults and this answer says
  LEADER_NOT_AVAILABLE with no partitions, as Kafka's does (clients retry); otherwise
  UNKNOWN_TOPIC_OR_PARTITION;
* a partition: leader = this node, replicas = ISR = {this node}, its leader epoch (v7+); a
  partition registered but not hosted (its log dir is offline) is LEADER_NOT_AVAILABLE with
  leader -1 and this node among the offline replicas (v5+).

Authorization (with ``authorizer.class.name``): a request for every topic lists only the
topics the principal may Describe; a name asked for that it may not Describe is
TOPIC_AUTHORIZATION_FAILED (existing or not: nothing leaks); auto-creation needs Create on the
Cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. ``include_topic_authorized_operations``
(v8+) fills ``topic_authorized_operations``; ``include_cluster_authorized_operations`` fills
``cluster_authorized_operations`` at v8-10 only (v11 dropped both fields in favour of
DescribeCluster); unrequested, they say "not requested" (INT32 min).

Brokers: this node with the advertised host and port; the controller is this node (v1+); the
cluster id from ``meta.properties`` (v2+). The top-level ``error_code`` (v13, KIP-1102) is
NONE: Strata never asks a client to re-bootstrap.
"""

from __future__ import annotations

import functools
import logging
import typing
import uuid
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.broker_state import BrokerState
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.handlers import ApiError
from strata.broker.handlers.create_topics import TopicSpec, create_topic
from strata.broker.network.request_context import RequestContext
from strata.broker.security.authorization import authorized_operations
from strata.broker.topic_store import TopicRecord, invalid_topic_name_reason
from strata.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_entity, build_response, response_type
from strata.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
)
from strata.storage.errors import StorageError

logger = logging.getLogger(__name__)

INTERNAL_TOPICS: Final = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
ZERO_UUID: Final = uuid.UUID(int=0)
FIRST_TOPIC_ID_VERSION: Final = 12  # topics asked for by id (v10-11 have the field, unused)


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    version = ctx.header.api_version
    requested = request.topics
    store = state.topic_store
    topics: list[dict[str, object]] = []
    if requested is None or (version == 0 and not requested):
        names = [n for n in sorted(store.topics())
                 if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
        allow_auto_create = False
    elif version >= 10 and any(_by_id(t) for t in requested):
        if version < FIRST_TOPIC_ID_VERSION:
            return _response(ctx, version, [
                {**_topic_error(t.name or "", ErrorCode.invalid_request),
                 "topic_id": t.topic_id or ZERO_UUID} for t in requested])
        names, topics = _names_of_ids(ctx, [t.topic_id or ZERO_UUID for t in requested])
        if any(t.name is None and not (t.topic_id and t.topic_id.int) for t in requested):
            topics.append(_topic_error("", ErrorCode.invalid_request))  # neither name nor id
        allow_auto_create = False
    else:
        names = list(dict.fromkeys(t.name for t in requested))
        allow_auto_create = state.config.auto_create_topics_enable and (
            version < 4 or bool(request.allow_auto_topic_creation)
        )
    with_topic_ops = version >= 8 and bool(request.include_topic_authorized_operations)
    for name in names:
        record = store.get(name)
        if name is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                  name):
            topics.append(_topic_error(name, ErrorCode.topic_authorization_failed))
        elif record is not None:
            topic = describe_topic(state, record, _built_partitions(state, record, version))
            if with_topic_ops:
                topic["topic_authorized_operations"] = authorized_operations(
                    state.authorizer, ctx.principal, ctx.client_host, ResourceType.TOPIC, name)
            topics.append(topic)
        elif name is None or invalid_topic_name_reason(name) is not None:
            topics.append(_topic_error(name or "", ErrorCode.invalid_topic_exception))
        elif allow_auto_create and not (
                ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
            topics.append(_topic_error(name, ErrorCode.topic_authorization_failed))
        elif allow_auto_create:
            topics.append(_topic_error(name, await _auto_create(state, name)))
        else:
            topics.append(_topic_error(name, ErrorCode.unknown_topic_or_partition))
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(state.authorizer, ctx.principal, ctx.client_host,
                                            ResourceType.CLUSTER)
    return _response(ctx, version, topics, cluster_ops)


def _response(ctx: RequestContext, version: int, topics: list[dict[str, object]],
              cluster_ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> Any:
    state = ctx.state
    return build_response(ApiKey.METADATA, version, {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in state.live_brokers(ctx.listener)],
        "cluster_id": state.cluster_id,
        "controller_id": state.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.none,
    })


def _by_id(topic: Any) -> bool:
    """Whether a v10+ request topic is named by id (a non-zero id, or a null name)."""
    return topic.name is None or (topic.topic_id is not None and topic.topic_id.int != 0)


def _names_of_ids(ctx: RequestContext, topic_ids: list[uuid.UUID]
                  ) -> tuple[list[str], list[dict[str, object]]]:
    """The names of the topics asked for by id that may be described, and the answers for the
    other ids (unknown: UNKNOWN_TOPIC_ID; not describable: TOPIC_AUTHORIZATION_FAILED)."""
    by_id = {record.topic_id: name for name, record in ctx.state.topic_store.topics().items()}
    names: list[str] = []
    refused: list[dict[str, object]] = []
    for topic_id in dict.fromkeys(i for i in topic_ids if i.int != 0):
        name = by_id.get(topic_id)
        if name is None:
            refused.append({**_topic_error(None, ErrorCode.unknown_topic_id),
                            "topic_id": topic_id})
        elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            refused.append({**_topic_error(None, ErrorCode.topic_authorization_failed),
                            "topic_id": topic_id})
        else:
            names.append(name)
    return names, refused


async def _auto_create(state: BrokerState, name: str) -> ErrorCode:
    """Create ``name`` with the broker defaults; the error code this Metadata answer carries."""
    spec = TopicSpec(name, state.config.num_partitions,
                     state.config.default_replication_factor, {})
    try:
        await create_topic(state, spec)
        logger.info("auto-created topic %s with %d partitions", name, spec.partitions)
    except ApiError as exc:
        if exc.error_code != ErrorCode.topic_already_exists:  # lost a race: created anyway
            logger.warning("auto-creating topic %s failed: %s", name, exc.message)
            return exc.error_code
    except StorageError as exc:
        logger.warning("auto-creating topic %s failed: %s", name, exc)
        return ErrorCode(exc.error_code)
    return ErrorCode.leader_not_available


def describe_topic(state: BrokerState, record: TopicRecord,
                   partitions: list[Any] | None = None) -> dict[str, object]:
    """One existing topic as Metadata (and DescribeTopicPartitions) describe it: its id, its
    partitions with leader, epoch, replicas, ISR and offline replicas (``partitions``: already
    built)."""
    if partitions is None:
        partitions = (_cluster_partitions(state, record) if state.cluster is not None
                      else _local_partitions(state, record))
    return {
        "error_code": ErrorCode.none,
        "name": record.name,
        "topic_id": record.topic_id,
        "is_internal": record.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _local_partitions(state: BrokerState, record: TopicRecord) -> list[dict[str, object]]:
    """A single broker's partitions, as its replica manager hosts them."""
    node = state.node_id
    partitions: list[dict[str, object]] = []
    for index in range(record.partitions):
        partition = state.replica_manager.get_partition(record.name, index)
        if partition is None or partition.log.offline or partition.leader_id is None:
            partitions.append({
                "error_code": ErrorCode.leader_not_available, "partition_index": index,
                "leader_id": -1, "leader_epoch": record.leader_epochs[index],
                "replica_nodes": [node], "isr_nodes": [], "offline_replicas": [node],
            })
            continue
        partitions.append({
            "error_code": ErrorCode.none,
            "partition_index": index,
            "leader_id": partition.leader_id,
            "leader_epoch": partition.leader_epoch,
            "replica_nodes": list(partition.replicas),
            "isr_nodes": sorted(partition.isr),
            "offline_replicas": [],
        })
    return partitions


def _cluster_partitions(state: BrokerState, record: TopicRecord) -> list[dict[str, object]]:
    """A topic's partitions as the cluster metadata has them: leaders, replicas and ISRs from
    the image (a leader that is not registered is reported as none)."""
    assert state.cluster is not None
    image = state.cluster.image
    live = image.brokers
    partitions: list[dict[str, object]] = []
    for index, p in image.topic_partitions(record.name):
        offline = [r for r in p.replicas if r not in live]
        leader = p.leader if p.has_leader and p.leader in live else -1
        partitions.append({
            "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": offline,
        })
    return partitions


# Per (topic, version): the registrations and live brokers its partitions were built from, and
# the kio entities built. Metadata for every topic is what clients ask most; rebuilding ten
# thousand partition entities per request costs ~100 ms, while an unchanged topic's entities
# (immutable) can be sent again. The check is by value, so any change rebuilds the topic.
_BUILT: dict[tuple[str, int], tuple[tuple[object, ...], Mapping[int, object], list[Any]]] = {}
MAX_BUILT_TOPICS: Final = 10_000


def _built_partitions(state: BrokerState, record: TopicRecord, version: int) -> list[Any] | None:
    """The topic's partitions as ``version``'s kio entities, from the cache when the cluster
    image still holds the same registrations and live brokers (cluster mode only)."""
    if state.cluster is None:
        return None
    image = state.cluster.image
    registrations = tuple(p for _, p in image.topic_partitions(record.name))
    key = (record.name, version)
    hit = _BUILT.get(key)
    if hit is not None and hit[0] == registrations and hit[1] == image.brokers:
        return hit[2]
    entity = _partition_entity(version)
    built = [build_entity(entity, p) for p in _cluster_partitions(state, record)]
    if len(_BUILT) >= MAX_BUILT_TOPICS:
        _BUILT.clear()
    _BUILT[key] = (registrations, image.brokers, built)
    return built


@functools.cache
def _partition_entity(version: int) -> type[Any]:
    """kio's ``MetadataResponsePartition`` of ``version``."""
    topic = typing.get_args(typing.get_type_hints(
        response_type(ApiKey.METADATA, version))["topics"])[0]
    entity: type[Any] = typing.get_args(typing.get_type_hints(topic)["partitions"])[0]
    return entity


def _topic_error(name: str | None, error: ErrorCode) -> dict[str, object]:
    return {"error_code": error, "name": name, "topic_id": ZERO_UUID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
