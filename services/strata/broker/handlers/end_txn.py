"""EndTxn v0-v5: a producer commits or aborts its open transaction.

The coordinator writes PrepareCommit / PrepareAbort to ``__transaction_state``
(``TransactionCoordinator.handle_end_transaction`` through ``TransactionRuntime.run``) and
answers once it is in the log; the markers are then written to every partition of the
transaction and the CompleteCommit / CompleteAbort follows, without the client waiting. A
retried EndTxn of a completed transaction is answered NONE (v5+: with the producer id and
epoch). v5+ (KIP-890, transactions v2) bumps the epoch at every end and answers the producer id
and epoch the producer uses next; older versions answer -1 / -1. Write on the transactional id
is required (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
before v2.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_decision import fenced_error_for_version
from strata.broker.transaction.transaction_state import TransactionResult
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    transactional_id = request.transactional_id
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return _response(version, ErrorCode.transactional_id_authorization_failed)
    runtime = ctx.state.transaction_coordinator
    result = TransactionResult.COMMIT if request.committed else TransactionResult.ABORT
    client_version = TransactionVersion.for_end_txn(version)
    answer = await runtime.run(lambda: runtime.coordinator.handle_end_transaction(
        transactional_id, int(request.producer_id), int(request.producer_epoch), result,
        client_version, ctx.state.clock.milliseconds()))
    error = fenced_error_for_version(ApiKey.END_TXN, version, answer.error)
    if error != ErrorCode.none or not client_version.supports_epoch_bump:
        return _response(version, error)
    return _response(version, error, answer.producer_id, answer.producer_epoch)


def _response(version: int, error: int, producer_id: int = -1, epoch: int = -1) -> Any:
    return build_response(ApiKey.END_TXN, version, throttle_time_ms=0, error_code=error,
                          producer_id=producer_id, producer_epoch=epoch)
