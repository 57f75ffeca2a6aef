"""CreatePartitions (key 37, v0-3): grow a topic's partition count (never shrink it).

v2 is v1 in the flexible encoding; v3 changes nothing on the wire.

Per topic, Kafka's rules: a name given twice in one request is INVALID_REQUEST; without Alter
on the topic (with an authorizer), TOPIC_AUTHORIZATION_FAILED; an unknown
topic is UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one is INVALID_PARTITIONS;
manual ``assignments`` must list exactly the new partitions, each with valid replicas on live
brokers (INVALID_REPLICA_ASSIGNMENT). More partition replicas on this broker than it can hold
(``partition_capacity``) is POLICY_VIOLATION (Strata's own rule). ``validate_only``
checks and changes nothing. The new count is written to the ``TopicStore``, then each new
partition is hosted as leader at epoch 0.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import ApiError
from strata.broker.handlers.create_topics import (
    check_assignments,
    check_replication_factor,
    host_partitions,
)
from strata.broker.network.request_context import RequestContext
from strata.broker.partition_capacity import (
    PartitionCapacityError,
    check_capacity,
    replicas_here,
)
from strata.broker.quotas.request_quotas import MutationQuota
from strata.broker.topic_store import UnknownTopicError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import StorageError


async def _create_partitions(state: BrokerState, topic: Any, validate_only: bool,
                             quota: MutationQuota) -> None:
    record = state.topic_store.get(topic.name)
    if record is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition,
                         f"The topic '{topic.name}' does not exist.")
    count = int(topic.count)
    if count < record.partitions:
        raise ApiError(ErrorCode.invalid_partitions,
                         f"The topic {topic.name} currently has {record.partitions} partition(s); "
                         f"{count} would not be an increase.")
    if count == record.partitions:
        raise ApiError(ErrorCode.invalid_partitions,
                         f"Topic already has {record.partitions} partition(s).")
    added = count - record.partitions
    if topic.assignments is not None:
        if len(topic.assignments) != added:
            raise ApiError(ErrorCode.invalid_replica_assignment,
                             f"Attempted to add {added} additional partition(s), but only "
                             f"{len(topic.assignments)} assignment(s) were specified.")
        replica_lists = [[int(b) for b in a.broker_ids] for a in topic.assignments]
        check_assignments(state, replica_lists)
        for replicas in replica_lists:
            check_replication_factor(state, len(replicas))
    lists = None if topic.assignments is None else [
        [int(b) for b in a.broker_ids] for a in topic.assignments]
    try:
        check_capacity(state, replicas_here(state.node_id, added, record.replication_factor,
                                            len(state.live_broker_ids()), lists),
                       f"Adding {added} partition(s) to topic '{topic.name}'")
    except PartitionCapacityError as exc:
        raise ApiError(ErrorCode.policy_violation, str(exc)) from None
    if validate_only:
        return
    if not quota.admit(added):
        raise ApiError(ErrorCode.throttling_quota_exceeded,
                       "The throttling quota has been exceeded.")
    old_count = record.partitions
    try:
        if state.cluster is not None:
            record = await state.cluster.topic_store.set_partition_count(topic.name, count,
                                                                         lists)
        else:
            record = await state.topic_store.set_partition_count(topic.name, count)
    except UnknownTopicError:  # deleted while we were validating
        raise ApiError(ErrorCode.unknown_topic_or_partition,
                         f"The topic '{topic.name}' does not exist.") from None
    except ValueError as exc:  # another request grew it past ``count`` meanwhile
        raise ApiError(ErrorCode.invalid_partitions, str(exc)) from None
    await host_partitions(state, record, range(old_count, count))


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    counts = Counter(t.name for t in request.topics)
    quota = MutationQuota(state.quotas, ctx.principal, ctx.header.client_id,
                          ctx.header.api_key, ctx.header.api_version, state.clock.milliseconds())
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            if counts[topic.name] > 1:
                raise ApiError(ErrorCode.invalid_request,
                                 f"Duplicate topic in request: {topic.name}")
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                raise ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            await _create_partitions(state, topic, bool(request.validate_only), quota)
        except ApiError as exc:
            error, message = exc.error_code, exc.message
        except StorageError as exc:
            error, message = ErrorCode(exc.error_code), str(exc)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    ctx.throttle_time_ms = max(ctx.throttle_time_ms, quota.throttle_time_ms())
    return build_response(ApiKey.CREATE_PARTITIONS, ctx.header.api_version,
                          {"throttle_time_ms": ctx.throttle_time_ms, "results": results})
