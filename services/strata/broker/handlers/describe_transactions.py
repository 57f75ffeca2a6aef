"""DescribeTransactions v0: the coordinator's view of transactional ids (KIP-664).

Per id, in request order, as Kafka's ``TransactionCoordinator.handleDescribeTransactions``:
Describe on the transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); then
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not (yet) serve the id's
``__transaction_state`` partition, TRANSACTIONAL_ID_NOT_FOUND for an unknown id; else its state
(Kafka's names), timeout, start time (-1 without a transaction; 0 with an error, the schema's
default, as Kafka leaves it), producer id and epoch, and the
partitions of the transaction whose topic the principal may Describe.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    runtime = ctx.state.transaction_coordinator
    runtime.reconcile()
    states = [_describe(ctx, transactional_id) for transactional_id in request.transactional_ids]
    return build_response(ApiKey.DESCRIBE_TRANSACTIONS, version, throttle_time_ms=0,
                          transaction_states=states)


def _describe(ctx: RequestContext, transactional_id: str) -> dict[str, Any]:
    def error(code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "transactional_id": transactional_id,
                "transaction_state": "", "transaction_timeout_ms": 0,
                "transaction_start_time_ms": 0, "producer_id": -1, "producer_epoch": -1,
                "topics": []}

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         transactional_id):
        return error(ErrorCode.transactional_id_authorization_failed)
    state = ctx.state.transaction_coordinator.state_manager.get_transaction_state(
        transactional_id)
    if state is None:
        return error(ErrorCode.transactional_id_not_found)
    if isinstance(state, ErrorCode):
        return error(state)
    md = state.transaction_metadata
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(md.topic_partitions):
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            topics.setdefault(topic, []).append(index)
    return {"error_code": ErrorCode.none, "transactional_id": transactional_id,
            "transaction_state": str(md.state), "transaction_timeout_ms": md.txn_timeout_ms,
            "transaction_start_time_ms": md.txn_start_timestamp,
            "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
            "topics": [{"topic": topic, "partitions": partitions}
                       for topic, partitions in topics.items()]}
