"""LeaveGroup v0-v5: members leave a group (the group rebalances without them).

v0-v2 name one member; its error is the response's error (Kafka's rule: the top-level error if
there is one, else the member's). v3 (KIP-345) names a batch of ``(member id, group instance
id)``; an empty member id with an instance id removes that static member (an administrator's
removal); each member gets its own error and the top level carries group-wide errors only. v4
is flexible (KIP-482); v5 carries each member's ``reason`` (KIP-800), written to the log.

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request.
"""

from __future__ import annotations

import logging
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    for m in request.members if version >= 5 else ():
        if m.reason:
            logger.info("member %s (instance %s) leaves group %s (client reason: %s)",
                        m.member_id, m.group_instance_id, request.group_id, m.reason)
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
