"""Heartbeat v0-v4: a member says it is alive; the answer says whether to rejoin.

REBALANCE_IN_PROGRESS tells the member to rejoin; ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID that
it fell out of the group (``GroupCoordinator.heartbeat``). v3 adds ``group_instance_id``; v4
is flexible (KIP-482).

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    error = ctx.state.group_coordinator.heartbeat(
        request.group_id, request.member_id,
        request.group_instance_id if version >= 3 else None, request.generation_id)
    return build_response(ApiKey.HEARTBEAT, version, throttle_time_ms=0, error_code=error)
