"""ListTransactions v0-v2: the transactional ids this broker coordinates (KIP-664).

As Kafka's ``TransactionStateManager.listTransactionStates``: every id of the loaded
``__transaction_state`` partitions the principal may Describe, filtered by

* ``state_filters`` (Kafka's state names; a name that is no state is answered in
  ``unknown_state_filters`` and matches nothing),
* ``producer_id_filters``,
* v1+ ``duration_filter`` (KIP-994): only transactions started more than that many
  milliseconds ago (-1: no filter),
* v2+ ``transactional_id_pattern`` (KIP-1152): a regular expression the whole id matches
  (INVALID_REGULAR_EXPRESSION if it does not compile).

COORDINATOR_LOAD_IN_PROGRESS while a partition is loading (what is loaded is not the whole
answer then).
"""

from __future__ import annotations

import re
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_state import TransactionState
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    runtime = ctx.state.transaction_coordinator
    runtime.reconcile()
    manager = runtime.state_manager
    wanted: set[TransactionState] = set()
    unknown: list[str] = []
    for name in request.state_filters:
        state = TransactionState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            wanted.add(state)
    producer_ids = {int(p) for p in request.producer_id_filters}
    duration = int(getattr(request, "duration_filter", -1))
    pattern_text = getattr(request, "transactional_id_pattern", None)

    def response(error: ErrorCode, states: list[dict[str, Any]]) -> Any:
        return build_response(ApiKey.LIST_TRANSACTIONS, version, throttle_time_ms=0,
                              error_code=error, unknown_state_filters=unknown,
                              transaction_states=states)

    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except re.error:
            return response(ErrorCode.invalid_regular_expression, [])
    if manager.loading_partitions:
        return response(ErrorCode.coordinator_load_in_progress, [])
    if request.state_filters and not wanted:
        return response(ErrorCode.none, [])
    now = ctx.state.clock.milliseconds()
    states = []
    for partition in sorted(manager.owned_partitions):
        for transactional_id, md in sorted(manager.transactions(partition).items()):
            if wanted and md.state not in wanted:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if md.state is TransactionState.DEAD:
                continue
            if duration >= 0 and now - md.txn_start_timestamp <= duration:
                continue
            if pattern is not None and pattern.fullmatch(transactional_id) is None:
                continue
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 transactional_id):
                continue
            states.append({"transactional_id": transactional_id,
                           "producer_id": md.producer_id, "transaction_state": str(md.state)})
    return response(ErrorCode.none, states)
