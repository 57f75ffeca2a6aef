"""FindCoordinator v0-v6: which broker coordinates a consumer group or a transactional id.

Kafka's rule: the coordinator of a group is the leader of partition
``abs(java_string_hashcode(group)) % partitions`` of ``__consumer_offsets``
(``GroupCoordinator.coordinator_node``). The topic is created on the first FindCoordinator, as
Kafka does; Kafka then answers COORDINATOR_NOT_AVAILABLE and lets the client retry, this
broker answers with the coordinator at once (the topic is hosted when creation returns). A
partition without a leader, or led by a broker whose address this broker does not know, is
COORDINATOR_NOT_AVAILABLE (retriable: clients ask again).

Version rules: v0-v3 name one ``key`` and answer at the top level; v4+ (KIP-699) name a batch
of ``coordinator_keys`` of one ``key_type`` and answer one ``Coordinator`` per key, in request
order, each with its own error; v5 lets the broker answer TRANSACTION_ABORTABLE (KIP-890; never
answered by FindCoordinator itself); v6 adds key type 2 (SHARE, KIP-932), answered
INVALID_REQUEST: share groups are not built.

Key type 1 (TRANSACTION): the leader of partition ``partition_for(transactional_id)`` of
``__transaction_state``, created on the first such request (``TransactionRuntime.ensure_topic``).
An empty transactional id is INVALID_REQUEST; an empty group id is INVALID_GROUP_ID (Kafka's
``isValidGroupId``).

Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked per key before anything else.

Advertising FindCoordinator matters beyond groups: librdkafka enables LZ4 only when the broker
advertises FindCoordinator (its feature map dates LZ4 support by that API).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
BATCHED_VERSION = 4
"""The first version with ``coordinator_keys`` (KIP-699)."""


class Coordinator(NamedTuple):
    """One key's answer: its coordinator's address, or an error (node -1, host "", port -1)."""

    key: str
    error_code: ErrorCode
    error_message: str | None
    node_id: int = -1
    host: str = ""
    port: int = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if version < BATCHED_VERSION:
        found = await find(ctx, key_type, request.key)
        return build_response(ApiKey.FIND_COORDINATOR, version, throttle_time_ms=0,
                              error_code=found.error_code, error_message=found.error_message,
                              node_id=found.node_id, host=found.host, port=found.port)
    coordinators = [await find(ctx, key_type, key) for key in request.coordinator_keys]
    return build_response(ApiKey.FIND_COORDINATOR, version, throttle_time_ms=0,
                          coordinators=[c._asdict() for c in coordinators])


async def find(ctx: RequestContext, key_type: int, key: str) -> Coordinator:
    """The coordinator of ``key`` (a group id or a transactional id) for ``ctx``'s listener."""
    state = ctx.state
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return Coordinator(key, ErrorCode.transactional_id_authorization_failed,
                           f"Describe on transactional id {key!r} is not authorized")
    if key_type == GROUP_KEY_TYPE and not ctx.authorize(AclOperation.DESCRIBE,
                                                        ResourceType.GROUP, key):
        return Coordinator(key, ErrorCode.group_authorization_failed,
                           f"Describe on group {key!r} is not authorized")
    if key_type == TRANSACTION_KEY_TYPE:
        return await _find_transaction_coordinator(ctx, key)
    if key_type == SHARE_KEY_TYPE:
        return Coordinator(key, ErrorCode.invalid_request,
                           "Strata does not support share groups: no share coordinator")
    if key_type != GROUP_KEY_TYPE:
        return Coordinator(key, ErrorCode.invalid_request,
                           f"unknown coordinator key type {key_type}")
    if not key:
        return Coordinator(key, ErrorCode.invalid_group_id, "the group id must not be empty")
    coordinator = state.group_coordinator
    error = await coordinator.ensure_offsets_topic()
    if error != ErrorCode.none:
        return Coordinator(key, error, "the group coordinator topic cannot be created")
    node = coordinator.coordinator_node(key)
    endpoint = next((b for b in state.live_brokers(ctx.listener) if b.node_id == node), None)
    if endpoint is None:
        return Coordinator(key, ErrorCode.coordinator_not_available,
                           f"the partition of group {key!r} has no leader this broker knows")
    return Coordinator(key, ErrorCode.none, None, endpoint.node_id, endpoint.host,
                       endpoint.port)


async def _find_transaction_coordinator(ctx: RequestContext, key: str) -> Coordinator:
    """The leader of the id's ``__transaction_state`` partition (the topic created first)."""
    if not key:
        return Coordinator(key, ErrorCode.invalid_request,
                           "the transactional id must not be empty")
    runtime = ctx.state.transaction_coordinator
    error = await runtime.ensure_topic()
    if error != ErrorCode.none:
        return Coordinator(key, error, "the transaction coordinator topic cannot be created")
    node = runtime.coordinator_node(key)
    endpoint = next((b for b in ctx.state.live_brokers(ctx.listener) if b.node_id == node),
                    None)
    if endpoint is None:
        return Coordinator(key, ErrorCode.coordinator_not_available,
                           f"the partition of transactional id {key!r} has no leader this "
                           "broker knows")
    return Coordinator(key, ErrorCode.none, None, endpoint.node_id, endpoint.host,
                       endpoint.port)
