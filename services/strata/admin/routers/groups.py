"""``/v1/groups``: consumer groups — list, describe with lag, reset offsets, delete.

* ``GET /v1/groups``: ListGroups — id, state, type (``simple`` for groups that only store
  offsets of ``assign()`` consumers) and ``group_type``, the rebalance protocol as Kafka's
  admin client reports it (``classic``, ``consumer`` for KIP-848 groups, ``simple``);
* ``GET /v1/groups/{group_id}``: DescribeGroups (state, protocol, coordinator, members and
  their assignment), OffsetFetch (committed offsets) and ListOffsets (log end offsets): one
  offsets row per partition assigned or committed, with lag = log end - committed
  (``kafka-consumer-groups.sh --describe``); ``group_type`` as in the list. A group the
  coordinator does not know (state Dead) is 404 GROUP_ID_NOT_FOUND;
* ``POST /v1/groups/{group_id}/offsets/reset``: ``earliest | latest | timestamp | offset`` for
  the partitions named (default: every partition the group has committed), Kafka's clamping
  rules (``strata.client.group_offsets.reset_plan``, shared with ``strata groups reset-offsets``);
  409 NON_EMPTY_GROUP while the group has active members (Kafka: "Assignments can only be
  reset if the group is inactive"): their next commit would undo the reset;
* ``DELETE /v1/groups/{group_id}``: DeleteGroups → 204; 409 NON_EMPTY_GROUP with members;
* ``GET /v1/groups/{group_id}/configs``: DescribeConfigs of the GROUP resource (KIP-848:
  ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``), each value with its
  source; ``PATCH`` sets / deletes some (IncrementalAlterConfigs; a value the broker refuses
  is 400 INVALID_CONFIG with its message). The group need not exist.

Authorization (authentication on): the list shows only groups the caller may Describe (Kafka's
ListGroups rule); describe needs Group Describe, reset Group Read (as OffsetCommit does), delete
Group Delete, configs Group DescribeConfigs / AlterConfigs (as the broker checks).
"""

from __future__ import annotations

from typing import Annotated, Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from fastapi import APIRouter, Path, Response

from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    ConfigPatch,
    ConfigValue,
    GroupConfigs,
    GroupDescription,
    GroupMember,
    GroupOffset,
    GroupSummary,
    GroupType,
    OffsetReset,
    OffsetResetResult,
    ResetTarget,
    TopicPartitionRef,
)
from strata.admin.problems import ProblemError
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.client.group_offsets import PartitionOffsets, ResetSpec, ResetTo, reset_plan
from strata.client.kafka_admin import check_partitions, config_source_name
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix="/v1/groups", tags=["groups"], responses=PROBLEMS)

GroupPath = Annotated[str, Path(min_length=1, max_length=255, description="Group id.")]
Key = tuple[str, int]
ACTIVE_STATES = frozenset({ConsumerGroupState.PREPARING_REBALANCING,
                           ConsumerGroupState.COMPLETING_REBALANCING, ConsumerGroupState.STABLE})
_RESET_TO = {ResetTarget.EARLIEST: ResetTo.EARLIEST, ResetTarget.LATEST: ResetTo.LATEST,
             ResetTarget.OFFSET: ResetTo.OFFSET, ResetTarget.TIMESTAMP: ResetTo.DATETIME}


def _state(state: Any) -> str:
    return state.name if isinstance(state, ConsumerGroupState) else str(state)


def group_type(kind: Any, simple: bool) -> GroupType:
    """Kafka's ``GroupType`` from a listing or description: ``consumer`` for a KIP-848 group,
    else ``simple`` for an offsets-only group, else ``classic``."""
    if kind == ConsumerGroupType.CONSUMER:
        return "consumer"
    return "simple" if simple else "classic"


def _list(gateway: KafkaGateway) -> list[GroupSummary]:
    kafka = gateway.kafka
    kafka.metadata()
    return summaries(kafka.list_consumer_groups())


def summaries(answer: Any) -> list[GroupSummary]:
    """ListGroups' valid listings as summaries, by group id (the console's list too)."""
    return sorted((GroupSummary(group_id=g.group_id, state=_state(g.state),
                                type="simple" if g.is_simple_consumer_group else "consumer",
                                group_type=group_type(g.type, g.is_simple_consumer_group))
                   for g in answer.valid), key=lambda g: g.group_id)


def _rows(assigned: dict[Key, str], committed: dict[Key, int],
          ends: dict[Key, int]) -> list[GroupOffset]:
    rows = []
    for key in sorted(set(assigned) | set(committed)):
        done, end = committed.get(key), ends.get(key)
        lag = max(end - done, 0) if done is not None and end is not None else None
        rows.append(GroupOffset(topic=key[0], partition=key[1], committed_offset=done,
                                log_end_offset=end, lag=lag, member_id=assigned.get(key)))
    return rows


def describe_group(gateway: KafkaGateway, group: str, check_cluster: bool = True
                   ) -> GroupDescription:
    """``check_cluster``: a whole-cluster Metadata request first, so an unreachable cluster
    is 503 CLUSTER_UNREACHABLE (the web console, which has just reached it, skips it)."""
    kafka = gateway.kafka
    if check_cluster:
        kafka.metadata()
    description = kafka.describe_consumer_group(group)
    assigned = {(tp.topic, tp.partition): m.member_id
                for m in description.members for tp in m.assignment.topic_partitions}
    committed = kafka.committed_offsets(group)
    ends = kafka.list_offsets(sorted(set(assigned) | set(committed)), "latest")
    coordinator = description.coordinator
    return GroupDescription(
        group_id=group, state=_state(description.state),
        group_type=group_type(description.type, description.is_simple_consumer_group),
        protocol=description.partition_assignor or None,
        coordinator=coordinator.id if coordinator is not None else None,
        members=[GroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, host=m.host,
            assignment=sorted((TopicPartitionRef(topic=tp.topic, partition=tp.partition)
                               for tp in m.assignment.topic_partitions),
                              key=lambda r: (r.topic, r.partition)))
            for m in description.members],
        offsets=_rows(assigned, committed, ends))


def _selected(gateway: KafkaGateway, body: OffsetReset, committed: dict[Key, int]) -> list[Key]:
    if body.topics is None:
        return sorted(committed)
    metadata = gateway.kafka.metadata()
    keys: list[Key] = []
    for selection in body.topics:
        topic = gateway.kafka.topic(selection.topic, metadata)
        check_partitions(topic, selection.partitions or [])
        wanted = (selection.partitions if selection.partitions is not None
                  else sorted(topic.partitions))
        keys += [(selection.topic, p) for p in wanted]
    return sorted(dict.fromkeys(keys))


def reset_offsets(gateway: KafkaGateway, group: str, body: OffsetReset) -> OffsetResetResult:
    plan, ends = plan_reset(gateway, group, body)
    gateway.kafka.alter_consumer_group_offsets(group, plan)
    return OffsetResetResult(group_id=group, offsets=_rows({}, dict(plan), ends))


def plan_reset(gateway: KafkaGateway, group: str, body: OffsetReset
               ) -> tuple[dict[Key, int], dict[Key, int]]:
    """The offsets a reset would commit (nothing is committed) and the partitions' log end
    offsets: the dry run of ``reset_offsets`` (the web console's preview)."""
    kafka = gateway.kafka
    description = kafka.describe_consumer_group(group, must_exist=False)
    if description.state in ACTIVE_STATES:
        raise ProblemError.kafka(
            "NON_EMPTY_GROUP",
            f"cannot reset offsets of group {group!r}: it has {len(description.members)} active "
            f"members (state {_state(description.state)}); stop its consumers first")
    committed = kafka.committed_offsets(group)
    keys = _selected(gateway, body, committed)
    if not keys:
        raise ProblemError.kafka("GROUP_ID_NOT_FOUND",
                                 f"group {group!r} has no committed offsets to reset")
    starts = kafka.list_offsets(keys, "earliest")
    ends = kafka.list_offsets(keys, "latest")
    at_time: dict[Key, int] = {}
    if body.to is ResetTarget.TIMESTAMP:
        assert body.timestamp is not None
        at_time = kafka.list_offsets(keys, body.timestamp)
    value = body.offset if body.to is ResetTarget.OFFSET else body.timestamp
    plan = reset_plan(ResetSpec(_RESET_TO[body.to], value or 0), {
        key: PartitionOffsets(starts[key], ends[key], committed.get(key),
                              at_time[key] if at_time.get(key, -1) >= 0 else None)
        for key in keys})
    return dict(plan), ends


def _delete(gateway: KafkaGateway, group: str) -> None:
    kafka = gateway.kafka
    kafka.metadata()
    error = kafka.delete_consumer_groups([group])[group]
    if error is not None:
        raise error


def group_configs(gateway: KafkaGateway, group: str, patch: ConfigPatch | None = None
                  ) -> GroupConfigs:
    kafka = gateway.kafka
    if patch is not None:
        kafka.alter_group_configs(group, patch.set, patch.delete)
    entries = kafka.group_configs(group)
    return GroupConfigs(group_id=group, configs={
        name: ConfigValue(value=entry.value, source=config_source_name(entry.source))
        for name, entry in sorted(entries.items())})


@router.get("", summary="Consumer groups and their state")
async def list_groups(gateway: GatewayDep, access: AccessDep) -> list[GroupSummary]:
    rows = await gateway.run(_list, gateway)
    if access.unrestricted:
        return rows
    return [row for row in rows
            if await access.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, row.group_id)]


@router.get("/{group_id}", summary="State, members, assignment, committed offsets and lag")
async def get_group(gateway: GatewayDep, access: AccessDep,
                    group_id: GroupPath) -> GroupDescription:
    await access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
    return await gateway.run(describe_group, gateway, group_id)


@router.post("/{group_id}/offsets/reset", summary="Reset committed offsets (group inactive)")
async def reset_group_offsets(gateway: GatewayDep, access: AccessDep, group_id: GroupPath,
                              body: OffsetReset) -> OffsetResetResult:
    await access.require(AclOperation.READ, ResourceType.GROUP, group_id)
    return await gateway.run(reset_offsets, gateway, group_id, body)


@router.delete("/{group_id}", status_code=204, response_class=Response,
               summary="Delete a group and its committed offsets")
async def delete_group(gateway: GatewayDep, access: AccessDep, group_id: GroupPath) -> Response:
    await access.require(AclOperation.DELETE, ResourceType.GROUP, group_id)
    await gateway.run(_delete, gateway, group_id)
    return Response(status_code=204)


@router.get("/{group_id}/configs", summary="A group's configs (KIP-848 consumer timeouts)")
async def get_group_configs(gateway: GatewayDep, access: AccessDep,
                            group_id: GroupPath) -> GroupConfigs:
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP, group_id)
    return await gateway.run(group_configs, gateway, group_id)


@router.patch("/{group_id}/configs", summary="Set or delete a group's configs")
async def alter_group_configs(gateway: GatewayDep, access: AccessDep, group_id: GroupPath,
                              body: ConfigPatch) -> GroupConfigs:
    await access.require(AclOperation.ALTER_CONFIGS, ResourceType.GROUP, group_id)
    return await gateway.run(group_configs, gateway, group_id, body)
