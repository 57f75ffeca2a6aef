"""InitProducerId v0-v6: producer ids for idempotent producers and transactional ids.

* ``transactional_id`` null — an idempotent producer (the default in the Java client and
  kafka-python 3, opt-in in librdkafka): a new producer id from ``ProducerIdManager`` (unique
  and increasing across restarts) and epoch 0. The partitions' producer state then checks
  epochs and sequence numbers and answers retries with their original offsets
  (docs/architecture.md, "Groups and producers").
* ``transactional_id`` "" — INVALID_REQUEST (Kafka's rule).
* any other ``transactional_id`` — the transaction coordinator decides
  (``TransactionCoordinator.handle_init_producer_id`` through ``TransactionRuntime.run``): the
  id's producer id and a bumped epoch, written to ``__transaction_state`` first; an open
  transaction of an older epoch is fenced and aborted first (CONCURRENT_TRANSACTIONS: the client
  retries); NOT_COORDINATOR when this broker does not lead the id's partition;
  INVALID_TRANSACTION_TIMEOUT past ``transaction.max.timeout.ms``.

v3 adds the producer's current ``producer_id`` / ``producer_epoch`` (KIP-360, so a producer
can bump its epoch after an error): both -1, or both set, else INVALID_REQUEST (Kafka's check).
For an idempotent producer Kafka ignores them and always hands out a new producer id at epoch
0, and so does Strata. v4 answers PRODUCER_FENCED (older versions INVALID_PRODUCER_EPOCH:
``fenced_error_for_version``), v5 is KIP-890's, v6 (KIP-939 two-phase commit) is answered as a
Kafka broker with ``transaction.two.phase.commit.enable=false`` does (``enable2_pc``:
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; ``keep_prepared_txn``: UNSUPPORTED_VERSION), its
ongoing-transaction fields -1.

Authorization (Kafka's, KIP-679): an idempotent producer needs IdempotentWrite on the Cluster
or Write on some topic (CLUSTER_AUTHORIZATION_FAILED); a transactional id needs Write on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.transaction.transaction_decision import (
    ProducerIdAndEpoch,
    fenced_error_for_version,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    transactional_id = request.transactional_id
    authorizer = ctx.state.authorizer
    if transactional_id is None and authorizer is not None and not (
            ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
            or authorizer.rules.authorize_any(ctx.principal, ctx.client_host,
                                              AclOperation.WRITE, ResourceType.TOPIC)):
        return _response(version, ErrorCode.cluster_authorization_failed)
    if transactional_id and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                              transactional_id):
        return _response(version, ErrorCode.transactional_id_authorization_failed)
    if (getattr(request, "producer_id", -1) == -1) != (getattr(request, "producer_epoch", -1)
                                                      == -1):
        return _response(version, ErrorCode.invalid_request)
    if transactional_id is None:
        producer_id = await ctx.state.producer_id_manager.generate_producer_id()
        return _response(version, ErrorCode.none, producer_id, 0)
    if transactional_id == "":
        return _response(version, ErrorCode.invalid_request)
    runtime = ctx.state.transaction_coordinator
    producer_id = int(getattr(request, "producer_id", -1))
    expected = (None if producer_id == -1
                else ProducerIdAndEpoch(producer_id, int(request.producer_epoch)))
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
    answer = await runtime.run(lambda: runtime.coordinator.handle_init_producer_id(
        transactional_id, timeout_ms, expected, ctx.state.clock.milliseconds(),
        enable_two_pc=bool(getattr(request, "enable2_pc", False)),
        keep_prepared_txn=bool(getattr(request, "keep_prepared_txn", False))),
        transactional_id)
    error = fenced_error_for_version(ApiKey.INIT_PRODUCER_ID, version, answer.error)
    if error != ErrorCode.none:
        return _response(version, error)
    return _response(version, error, answer.producer_id, answer.producer_epoch)


def _response(version: int, error_code: int, producer_id: int = -1, epoch: int = -1) -> Any:
    return build_response(ApiKey.INIT_PRODUCER_ID, version, throttle_time_ms=0,
                          error_code=error_code, producer_id=producer_id, producer_epoch=epoch,
                          ongoing_txn_producer_id=-1, ongoing_txn_producer_epoch=-1)
