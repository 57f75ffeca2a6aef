"""DeleteGroups v0-v2: delete groups that have no members, with their committed offsets.

v2 is flexible (KIP-482); the versions differ in nothing else.

Per group, in request order (a name given twice is answered once): NONE after tombstones for
its offsets and metadata are written and on every in-sync replica of its
``__consumer_offsets`` partition (else that write's error as a coordinator answers it);
NON_EMPTY_GROUP while it has members; GROUP_ID_NOT_FOUND when it does not exist
(``GroupCoordinator.delete_groups``).

Authorization: Delete on each group, else GROUP_AUTHORIZATION_FAILED for that group.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = [g for g in request.groups_names
               if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g)]
    coordinator = ctx.state.group_coordinator
    deleted = coordinator.delete_groups(allowed) if allowed else {}
    for group_id, error in list(deleted.items()):  # each group's tombstones on its ISR
        deleted[group_id] = await coordinator.acknowledged_error(group_id, error, offsets=False)
    results = {g: deleted.get(g, ErrorCode.group_authorization_failed)
               for g in request.groups_names}
    return build_response(ApiKey.DELETE_GROUPS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": e} for g, e in results.items()],
    })
