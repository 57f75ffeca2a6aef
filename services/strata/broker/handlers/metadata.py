"""Metadata (key 3, v0-8): brokers, controller, cluster id, and topics with their partitions.

Answers from the ``TopicStore`` (which topics exist) and the ``ReplicaManager`` (what each hosted
partition looks like). Kafka's rules:

* which topics: v0 with an empty list, or v1+ with a null list, means every topic; otherwise the
  names asked for, in order (duplicates answered once);
* an unknown name: INVALID_TOPIC_EXCEPTION if it is not a legal name; else, when
  ``auto.create.topics.enable`` is on and the request allows it (``allow_auto_topic_creation``,
  v4+; always before v4), the topic is created with the broker defaults and this answer says
  LEADER_NOT_AVAILABLE with no partitions, as Kafka's does (clients retry); otherwise
  UNKNOWN_TOPIC_OR_PARTITION;
* a partition: leader = this node, replicas = ISR = {this node}, its leader epoch (v7+); a
  partition registered but not hosted (its log dir is offline) is LEADER_NOT_AVAILABLE with
  leader -1 and this node among the offline replicas (v5+).

Authorization (with ``authorizer.class.name``, Kafka's ``handleTopicMetadataRequest``): a
request for every topic lists only the topics the principal may Describe; a name asked for
that it may not Describe is TOPIC_AUTHORIZATION_FAILED (existing or not: nothing leaks);
auto-creation needs Create on the Cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
``include_topic_authorized_operations`` / ``include_cluster_authorized_operations`` (v8) fill
the ``*_authorized_operations`` bit fields; otherwise they say "not requested" (INT32 min).

Brokers: this node with the advertised host and port; the controller is this node (v1+); the
cluster id from ``meta.properties`` (v2+). Topic ids appear only from v10, which is not served.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import ApiError
from strata.broker.handlers.create_topics import TopicSpec, create_topic
from strata.broker.network.connection import RequestContext
from strata.broker.security.authorization import authorized_operations
from strata.broker.topic_store import TopicRecord, invalid_topic_name_reason
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
)
from strata.storage.errors import StorageError

logger = logging.getLogger(__name__)

INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    version = ctx.header.api_version
    requested = request.topics
    store = state.topic_store
    if requested is None or (version == 0 and not requested):
        names = [n for n in sorted(store.topics())
                 if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
        allow_auto_create = False
    else:
        names = list(dict.fromkeys(t.name for t in requested))
        allow_auto_create = state.config.auto_create_topics_enable and (
            version < 4 or bool(request.allow_auto_topic_creation)
        )
    with_topic_ops = version >= 8 and bool(request.include_topic_authorized_operations)
    topics = []
    for name in names:
        record = store.get(name)
        if name is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                  name):
            topics.append(_topic_error(name, ErrorCode.topic_authorization_failed))
        elif record is not None:
            topic = _topic(state, record)
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
    if version >= 8 and request.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(state.authorizer, ctx.principal, ctx.client_host,
                                            ResourceType.CLUSTER)
    return build_response(ApiKey.METADATA, version, {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in state.live_brokers(ctx.listener)],
        "cluster_id": state.cluster_id,
        "controller_id": state.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
    })


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


def _topic(state: BrokerState, record: TopicRecord) -> dict[str, object]:
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


def _topic_error(name: str, error: ErrorCode) -> dict[str, object]:
    return {"error_code": error, "name": name, "is_internal": False, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
