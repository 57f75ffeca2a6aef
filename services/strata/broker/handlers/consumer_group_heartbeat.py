"""ConsumerGroupHeartbeat v0-v1 (KIP-848): a member of a consumer group joins, stays, leaves.

The request goes to ``GroupCoordinator.consumer_groups.heartbeat`` (the rules are
``group.consumer_group_membership``'s): member epoch 0 joins, -1 leaves, -2 leaves for now
(static members); any other epoch is the member's current one, with the partitions it owns
(``topic_partitions``, null when unchanged). The answer carries the member's epoch, the
heartbeat interval, and its assignment (topic ids and partitions) when it changed or the
request was a full one. Errors are Kafka's: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE — with an ``error_message``.

Versions: v0 may leave ``member_id`` empty on join (the coordinator makes one); from v1 the
member chooses its id (an empty one is INVALID_REQUEST) and may subscribe by
``subscribed_topic_regex`` (a full match over topic names, evaluated here). Both are flexible.

Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import uuid
from typing import Any, Final

from strata.broker.group.consumer_group_member import Assignment
from strata.broker.group.consumer_group_membership import HeartbeatRequest, HeartbeatResult
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

MEMBER_ID_REQUIRED_VERSION: Final = 1
"""The first version whose member ids are chosen by the consumer."""
_MS = datetime.timedelta(milliseconds=1)


def new_member_id() -> str:
    """A member id as Kafka makes one (``Uuid.randomUuid().toString()``: URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(version, HeartbeatResult(
            ErrorCode.group_authorization_failed, request.member_id, 0,
            message=f"Read on group {request.group_id!r} is not authorized"))
    member_id = request.member_id
    if version < MEMBER_ID_REQUIRED_VERSION and not member_id and request.member_epoch == 0:
        member_id = new_member_id()
    owned = None
    if request.topic_partitions is not None:
        owned = [(t.topic_id, int(p)) for t in request.topic_partitions
                 if t.topic_id is not None for p in t.partitions]
    names = request.subscribed_topic_names
    result = ctx.state.group_coordinator.consumer_groups.heartbeat(
        request.group_id, HeartbeatRequest(
            member_id=member_id, member_epoch=int(request.member_epoch),
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout // _MS,
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor, owned=owned,
            client_id=ctx.header.client_id or "", client_host=f"/{ctx.client_host}"))
    error = await ctx.state.group_coordinator.acknowledged_error(
        request.group_id, result.error, offsets=False)
    if error != result.error:  # the member's new epoch is not on the whole ISR yet
        result = dataclasses.replace(result, error=error, message=(
            f"the group's records did not reach the in-sync replicas: {error.name}"))
    return _answer(version, result)


def _answer(version: int, result: HeartbeatResult) -> Any:
    ok = result.error == ErrorCode.none
    return build_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "error_message": result.message if not ok else None,
        "member_id": result.member_id if ok else None,
        "member_epoch": result.member_epoch if ok else 0,
        "heartbeat_interval_ms": result.heartbeat_interval_ms if ok else 0,
        "assignment": None if result.assignment is None or not ok
        else {"topic_partitions": topic_partitions(result.assignment)},
    })


def topic_partitions(assignment: Assignment) -> list[dict[str, object]]:
    return [{"topic_id": topic_id, "partitions": sorted(partitions)}
            for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0]))]
