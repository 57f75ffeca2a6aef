"""ConsumerGroupDescribe v0-v1 (KIP-848): a consumer group's epochs, members, assignments.

Per group (``GroupCoordinator.consumer_groups.describe``): its state (Kafka's names: Empty,
Assigning, Reconciling, Stable), group epoch, target assignment epoch, the assignor in use,
and per member its epoch, client, subscription, current assignment and target assignment
(topic ids with their names). A classic group or an unknown id is GROUP_ID_NOT_FOUND ("Group
<id> is not a consumer group." / "Group <id> not found."), with state Dead. v1 adds each
member's ``member_type`` (1: a consumer-protocol member, 0: a classic member of a consumer
group, online migration). Both versions are flexible.

Authorization: Describe on each group, else GROUP_AUTHORIZATION_FAILED for that group;
``authorized_operations`` from the ACLs when asked, else ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from strata.broker.group.consumer_group_member import Assignment
from strata.broker.network.request_context import RequestContext
from strata.broker.security.authorization import authorized_operations
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType

CONSUMER_MEMBER_TYPE: Final = 1
"""``member_type`` of a member using the consumer protocol (0: classic, -1: unknown)."""
CLASSIC_MEMBER_TYPE: Final = 0
"""``member_type`` of a classic member of a consumer group (online migration)."""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    consumer_groups = ctx.state.group_coordinator.consumer_groups
    default_assignor = consumer_groups.membership.config.default_assignor
    names = {record.topic_id: name for name, record in ctx.state.topic_store.topics().items()}
    groups = []
    for group_id in request.group_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_error(group_id, ErrorCode.group_authorization_failed,
                                 f"Describe on group {group_id!r} is not authorized"))
            continue
        error, group, message = consumer_groups.describe(group_id)
        if group is None:
            groups.append(_error(group_id, error, message or f"group {group_id!r}: "
                                 f"{error.name}", str(ConsumerGroupState.DEAD)))
            continue
        operations = authorized_operations(
            ctx.state.authorizer, ctx.principal, ctx.client_host, ResourceType.GROUP,
            group_id) if request.include_authorized_operations \
            else AUTHORIZED_OPERATIONS_OMITTED
        groups.append(described(group, names, default_assignor, operations))
    return build_response(ApiKey.CONSUMER_GROUP_DESCRIBE, version, throttle_time_ms=0,
                          groups=groups)


def described(group: ConsumerGroup, names: Mapping[uuid.UUID, str], default_assignor: str,
              operations: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none, "error_message": None, "group_id": group.group_id,
        "group_state": str(group.state), "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.preferred_server_assignor(default_assignor),
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _assignment(m.assigned_partitions, names),
            "target_assignment": _assignment(group.target_assignment.get(m.member_id, {}),
                                             names),
            "member_type": CLASSIC_MEMBER_TYPE if m.uses_classic_protocol
            else CONSUMER_MEMBER_TYPE,
        } for m in group.members.values()],
        "authorized_operations": operations,
    }


def _assignment(assignment: Assignment, names: Mapping[uuid.UUID, str]) -> dict[str, Any]:
    return {"topic_partitions": [
        {"topic_id": topic_id, "topic_name": names.get(topic_id, ""),
         "partitions": sorted(partitions)}
        for topic_id, partitions in sorted(assignment.items(),
                                           key=lambda kv: names.get(kv[0], ""))]}


def _error(group_id: str, error: ErrorCode, message: str, state: str = "") -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "group_id": group_id,
            "group_state": state, "group_epoch": -1, "assignment_epoch": -1,
            "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
