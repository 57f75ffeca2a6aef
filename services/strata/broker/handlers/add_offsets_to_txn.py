"""AddOffsetsToTxn v0-v4: a consumer group's offsets join a producer's open transaction.

The group's ``__consumer_offsets`` partition (``GroupCoordinator.partition_for``) is added to
the transaction like any partition (``TransactionCoordinator.handle_add_offsets_to_transaction``,
written to ``__transaction_state`` before the answer); the offsets themselves come next, with
TxnOffsetCommit to the group coordinator. Authorization as in Kafka: Write on the transactional
id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the group
(GROUP_AUTHORIZATION_FAILED). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2; v3 is
flexible, v4 (KIP-890) lets the broker answer TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_decision import fenced_error_for_version
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    transactional_id = request.transactional_id
    group_id = request.group_id
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
    else:
        runtime = ctx.state.transaction_coordinator
        offsets_partition = ctx.state.group_coordinator.partition_for(group_id)
        answer = await runtime.run(lambda: runtime.coordinator.handle_add_offsets_to_transaction(
            transactional_id, int(request.producer_id), int(request.producer_epoch),
            offsets_partition, ctx.state.clock.milliseconds()), transactional_id)
        error = fenced_error_for_version(ApiKey.ADD_OFFSETS_TO_TXN, version, answer.error)
    return build_response(ApiKey.ADD_OFFSETS_TO_TXN, version, throttle_time_ms=0,
                          error_code=error)
