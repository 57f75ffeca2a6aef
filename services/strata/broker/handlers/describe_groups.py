"""DescribeGroups v0-v6: state, protocol and members of groups.

Per group (``GroupCoordinator.describe_group``): an unknown group is described as Dead with no
members and no error before v6; from v6 (KIP-1043) it is GROUP_ID_NOT_FOUND with the message
"Group <id> not found." and every error carries an ``error_message``. Member metadata and
assignments are filled only while the group is Stable. v3+ may ask for the authorized
operations: with no authorizer every group operation is allowed (READ, DELETE, DESCRIBE as
Kafka's bit field), else Kafka's "not asked" value, ``Integer.MIN_VALUE``. v4 lists each
member's ``group_instance_id``; v5 is flexible (KIP-482).

Authorization: Describe on each group, else GROUP_AUTHORIZATION_FAILED for that group;
``authorized_operations`` (v3+, when asked) from the ACLs.
"""

from __future__ import annotations

from typing import Any, Final

from strata.broker.group.state import GroupState
from strata.broker.network.request_context import RequestContext
from strata.broker.security.authorization import authorized_operations
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType

NOT_REQUESTED: Final = AUTHORIZED_OPERATIONS_OMITTED
GROUP_ID_NOT_FOUND_VERSION: Final = 6
"""The first version answering GROUP_ID_NOT_FOUND for an unknown group (KIP-1043)."""
DEAD: Final = str(GroupState.DEAD)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    coordinator = ctx.state.group_coordinator
    with_operations = version >= 3 and bool(request.include_authorized_operations)
    groups = []
    for group_id in request.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_error(group_id, ErrorCode.group_authorization_failed,
                                 f"Describe on group {group_id!r} is not authorized"))
            continue
        error, summary = coordinator.describe_group(group_id)
        if version >= GROUP_ID_NOT_FOUND_VERSION and error == ErrorCode.none \
                and summary.state == DEAD:
            groups.append(_error(group_id, ErrorCode.group_id_not_found,
                                 f"Group {group_id} not found.", DEAD))
            continue
        if error != ErrorCode.none:
            groups.append(_error(group_id, error, f"group {group_id!r}: {error.name}"))
            continue
        groups.append({
            "error_code": error,
            "error_message": None,
            "group_id": group_id,
            "group_state": summary.state,
            "protocol_type": summary.protocol_type,
            "protocol_data": summary.protocol_name,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata, "member_assignment": m.assignment}
                        for m in summary.members],
            "authorized_operations": authorized_operations(
                ctx.state.authorizer, ctx.principal, ctx.client_host, ResourceType.GROUP,
                group_id) if with_operations else NOT_REQUESTED,
        })
    return build_response(ApiKey.DESCRIBE_GROUPS, version, throttle_time_ms=0, groups=groups)


def _error(group_id: str, error: ErrorCode, message: str, state: str = "") -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "group_id": group_id,
            "group_state": state, "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": NOT_REQUESTED}
