"""ListGroups v0-v5: every group this broker coordinates, with its protocol type and state.

v3 is flexible; v4 (KIP-518) answers each group's state and takes ``states_filter``: only
groups in one of those states (Kafka's names, case-insensitive, as the Java admin client sends
them); v5 (KIP-848) answers each group's type — ``"classic"``, or ``"consumer"`` for a group of the
consumer protocol (``GroupCoordinator.consumer_groups``, protocol type ``consumer``, its state
by Kafka's names: Empty, Assigning, Reconciling, Stable) — and takes ``types_filter``
(case-insensitive). An empty filter lists all. COORDINATOR_LOAD_IN_PROGRESS (with the groups
loaded so far) while a ``__consumer_offsets`` partition is still being replayed;
COORDINATOR_NOT_AVAILABLE before the coordinator started.

Authorization: Describe on the Cluster lists every group; otherwise only the groups the
principal may Describe (Kafka's rule).
"""

from __future__ import annotations

from typing import Any, Final

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

CLASSIC_GROUP_TYPE: Final = "classic"
"""Kafka's ``Group.GroupType.CLASSIC`` as ListGroups v5 names it."""


async def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.state.group_coordinator
    error, classic = coordinator.list_groups()
    groups = [(g, t, state, CLASSIC_GROUP_TYPE) for g, t, state in classic]
    if error != ErrorCode.coordinator_not_available:
        groups.extend((g.group_id, g.protocol_type, g.state, g.group_type)
                      for g in coordinator.consumer_groups.list_groups())
    wanted = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    if types:
        groups = [g for g in groups if g[3] in types]
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        groups = [g for g in groups
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    return build_response(ApiKey.LIST_GROUPS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "error_code": error,
        "groups": [{"group_id": g, "protocol_type": t, "group_state": state,
                    "group_type": group_type}
                   for g, t, state, group_type in groups
                   if not wanted or state.lower() in wanted],
    })
