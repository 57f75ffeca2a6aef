"""SyncGroup v0-v5: members get their assignment; the leader brings everyone's.

The leader's request carries the assignment of every member; followers' requests wait until it
is stored (``GroupCoordinator.sync_group``), and every answer until the stored assignment is on
each in-sync replica of the group's ``__consumer_offsets`` partition (else
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, as Kafka answers a failed store). A member id
listed twice in the assignments keeps its last entry. Version rules: v3 adds
``group_instance_id``; v4 is flexible (KIP-482); v5 (KIP-559) carries the ``protocol_type``
and ``protocol_name`` the member joined with — when given, they must match the group's (else
INCONSISTENT_GROUP_PROTOCOL) — and answers the group's.

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
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await ctx.state.group_coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None, assignments,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None)
    error = await ctx.state.group_coordinator.acknowledged_error(
        request.group_id, result.error, offsets=False)
    if error != result.error:  # the stored assignment is not on the whole ISR: rejoin
        return build_response(ApiKey.SYNC_GROUP, version, throttle_time_ms=0, error_code=error,
                              protocol_type=None, protocol_name=None, assignment=b"")
    return build_response(ApiKey.SYNC_GROUP, version, throttle_time_ms=0,
                          error_code=result.error, protocol_type=result.protocol_type,
                          protocol_name=result.protocol_name, assignment=result.assignment)
