"""SyncGroup v0-v3: members get their assignment; the leader brings everyone's.

The leader's request carries the assignment of every member; followers' requests wait until it
is stored (``GroupCoordinator.sync_group``). v3 adds ``group_instance_id``. A member id listed
twice in the assignments keeps its last entry.

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response

MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await ctx.state.group_coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None, assignments)
    return build_response(ApiKey.SYNC_GROUP, version, throttle_time_ms=0,
                          error_code=result.error, assignment=result.assignment)
