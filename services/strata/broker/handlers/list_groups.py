"""ListGroups v0-v4: every group this broker coordinates, with its protocol type and state.

v3 is flexible; v4 (KIP-518) answers each group's state and takes ``states_filter``: only
groups in one of those states (Kafka's names, case-insensitive, as the Java admin client sends
them); an empty filter lists all. COORDINATOR_LOAD_IN_PROGRESS (with the groups loaded so far)
while a ``__consumer_offsets`` partition is still being replayed; COORDINATOR_NOT_AVAILABLE
before the coordinator started.

Authorization: Describe on the Cluster lists every group; otherwise only the groups the
principal may Describe (Kafka's rule).
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    error, groups = ctx.state.group_coordinator.list_groups()
    wanted = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        groups = [g for g in groups
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    return build_response(ApiKey.LIST_GROUPS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "error_code": error,
        "groups": [{"group_id": g, "protocol_type": t, "group_state": state}
                   for g, t, state in groups if not wanted or state.lower() in wanted],
    })
