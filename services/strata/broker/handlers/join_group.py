"""JoinGroup v0-v9: a consumer joins (or rejoins) a classic group.

Decodes the request into a version-neutral ``JoinRequest`` and waits for the coordinator's
answer (``GroupCoordinator.join_group``): at once for an error, a MEMBER_ID_REQUIRED (v4+, a
dynamic member's first JoinGroup, KIP-394) or a rejoin that changes nothing; otherwise when the
rebalance completes. Version rules:

* v0 has no rebalance timeout: the session timeout is used (Kafka's rule);
* v4+ asks a new dynamic member to rejoin with the member id it is given (``require_known``);
* v5 carries ``group_instance_id`` (static membership, KIP-345) and lists it per member;
* v6 is flexible (KIP-482); v7 answers ``protocol_type``, and ``protocol_name`` null rather
  than "" when no protocol is selected (an error answer);
* v8 carries the member's ``reason`` (KIP-800), written to the rebalance log;
* v9 answers ``skip_assignment`` (KIP-814): a static leader rejoining a Stable group unchanged
  is told it leads, with the members, and not to assign (``JoinRequest``).

A protocol name listed twice counts once (its first entry's metadata is kept), as Kafka's
members hold their protocols as a set of names.

The member's client host is Kafka's ``InetAddress.toString`` form, ``/127.0.0.1``, as
DescribeGroups and the group tools show it.

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED for the request.
"""

from __future__ import annotations

from typing import Any

from strata.broker.group.membership import JoinRequest
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    session_timeout_ms = _ms(request.session_timeout)
    instance = request.group_instance_id if version >= 5 else None
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=instance,
        require_known_member_id=version >= 4 and instance is None,
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
        rebalance_timeout_ms=_ms(request.rebalance_timeout) if version >= 1 else session_timeout_ms,
        session_timeout_ms=session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=_distinct_protocols(request.protocols),
        supports_skip_assignment=version >= 9,
        reason=request.reason if version >= 8 else None,
    )
    result = await ctx.state.group_coordinator.join_group(request.group_id, join)
    return build_response(ApiKey.JOIN_GROUP, version, {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "metadata": m.metadata} for m in result.members],
    })


def _distinct_protocols(protocols: Any) -> tuple[tuple[str, bytes], ...]:
    """``(name, metadata)`` per protocol name, the first entry of a repeated name kept. A
    member's protocols are a set of names to the coordinator (Kafka's
    ``MemberMetadata.protocols``): the group counts each name once per member, so a name
    listed twice would count as two members' support and no protocol could be chosen."""
    distinct: dict[str, bytes] = {}
    for protocol in protocols:
        distinct.setdefault(protocol.name, bytes(protocol.metadata))
    return tuple(distinct.items())


def _ms(value: Any) -> int:
    """A kio ``timedelta`` field in whole milliseconds."""
    return int(value.total_seconds() * 1000)
