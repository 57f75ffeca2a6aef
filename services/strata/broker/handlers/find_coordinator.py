"""FindCoordinator v0-v2: which broker coordinates a consumer group (or a transactional id).

Kafka's rule: the coordinator of a group is the leader of partition
``abs(java_string_hashcode(group)) % partitions`` of ``__consumer_offsets``
(``GroupCoordinator.coordinator_node``). The topic is created on the first FindCoordinator, as
Kafka does; Kafka then answers COORDINATOR_NOT_AVAILABLE and lets the client retry, this
broker answers with the coordinator at once (the topic is hosted when creation returns). A
partition without a leader, or led by a broker whose address this broker does not know, is
COORDINATOR_NOT_AVAILABLE (retriable: clients ask again).

Key type 1 (TRANSACTION) answers COORDINATOR_NOT_AVAILABLE: transactions are not built, and the
error is retriable-then-fatal in every client, naming the coordinator. An empty group id is
INVALID_GROUP_ID (Kafka's ``isValidGroupId``).

Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked before anything else.

Advertising FindCoordinator matters beyond groups: librdkafka enables LZ4 only when the broker
advertises FindCoordinator (its feature map dates LZ4 support by that API).
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.connection import RequestContext
from strata.broker.security.acl import AclOperation, ResourceType
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response

MIN_VERSION = 0
MAX_VERSION = 2

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    key = request.key
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    state = ctx.state
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return _error(version, ErrorCode.transactional_id_authorization_failed,
                      f"Describe on transactional id {key!r} is not authorized")
    if key_type == GROUP_KEY_TYPE and not ctx.authorize(AclOperation.DESCRIBE,
                                                        ResourceType.GROUP, key):
        return _error(version, ErrorCode.group_authorization_failed,
                      f"Describe on group {key!r} is not authorized")
    if key_type == TRANSACTION_KEY_TYPE:
        return _error(version, ErrorCode.coordinator_not_available,
                      "Strata does not support transactions yet: no transaction coordinator")
    if key_type != GROUP_KEY_TYPE:
        return _error(version, ErrorCode.invalid_request,
                      f"unknown coordinator key type {key_type}")
    if not key:
        return _error(version, ErrorCode.invalid_group_id, "the group id must not be empty")
    coordinator = state.group_coordinator
    error = await coordinator.ensure_offsets_topic()
    if error != ErrorCode.none:
        return _error(version, error, "the group coordinator topic cannot be created")
    node = coordinator.coordinator_node(key)
    endpoint = next((b for b in state.live_brokers(ctx.listener) if b.node_id == node), None)
    if endpoint is None:
        return _error(version, ErrorCode.coordinator_not_available,
                      f"the partition of group {key!r} has no leader this broker knows")
    return build_response(ApiKey.FIND_COORDINATOR, version, throttle_time_ms=0,
                          error_code=ErrorCode.none, error_message=None,
                          node_id=endpoint.node_id, host=endpoint.host, port=endpoint.port)


def _error(version: int, code: ErrorCode, message: str) -> Any:
    return build_response(ApiKey.FIND_COORDINATOR, version, throttle_time_ms=0, error_code=code,
                          error_message=message, node_id=-1, host="", port=-1)
