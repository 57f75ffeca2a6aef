"""LeaveGroup v0-v3: members leave a group (the group rebalances without them).

v0-v2 name one member; its error is the response's error (Kafka's rule: the top-level error if
there is one, else the member's). v3 (KIP-345) names a batch of ``(member id, group instance
id)``; an empty member id with an instance id removes that static member (an administrator's
removal); each member gets its own error and the top level carries group-wide errors only.

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response

MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error, member_errors = ctx.state.group_coordinator.leave_group(request.group_id, members)
    if version < 3:
        if error == ErrorCode.none and member_errors:
            error = member_errors[0]
        return build_response(ApiKey.LEAVE_GROUP, version, throttle_time_ms=0, error_code=error)
    return build_response(ApiKey.LEAVE_GROUP, version, {
        "throttle_time_ms": 0,
        "error_code": error,
        "members": [{"member_id": member_id, "group_instance_id": instance, "error_code": e}
                    for (member_id, instance), e in zip(members, member_errors, strict=False)],
    })
