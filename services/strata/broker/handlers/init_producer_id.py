"""InitProducerId v0-v5: producer ids for idempotent producers (transactions are refused).

* ``transactional_id`` null — an idempotent producer (the default in the Java client and
  kafka-python 3, opt-in in librdkafka): a new producer id from ``ProducerIdManager`` (unique
  and increasing across restarts) and epoch 0. The partitions' producer state then checks
  epochs and sequence numbers and answers retries with their original offsets
  (docs/architecture.md, "Groups and producers").
* ``transactional_id`` "" — INVALID_REQUEST (Kafka's rule).
* any other ``transactional_id`` — transactions are not built yet, so there is no transaction
  coordinator to fence and recover the id. Answered with UNSUPPORTED_VERSION: it is what Kafka
  says of a feature a broker does not serve, it is not retriable, and clients fail fast and
  clearly on it (the Java client and kafka-python raise a fatal "Unexpected error in
  InitProducerIdResponse: ... version of API is not supported" from ``initTransactions``).
  Rejected alternatives: COORDINATOR_NOT_AVAILABLE is retriable (clients would spin until
  ``max.block.ms`` and report a timeout, hiding the cause); TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  is fatal too but blames ACLs that do not exist. The broker logs why at WARNING.
  (librdkafka stops even earlier: it needs FindCoordinator for a transaction coordinator.)

v3 adds the producer's current ``producer_id`` / ``producer_epoch`` (KIP-360, so a producer
can bump its epoch after an error): both -1, or both set, else INVALID_REQUEST (Kafka's check).
For an idempotent producer Kafka ignores them and always hands out a new producer id at epoch
0, and so does Strata; they only matter to a transaction coordinator. v4 (PRODUCER_FENCED
instead of INVALID_PRODUCER_EPOCH) and v5 (KIP-890 transactions) change only transactional
answers. v6 (KIP-939 two-phase commit) is not served: it is a transaction feature.

Authorization (Kafka's, KIP-679): an idempotent producer needs IdempotentWrite on the Cluster
or Write on some topic (CLUSTER_AUTHORIZATION_FAILED); a transactional id needs Write on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)


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
    # Logged every time: clients treat the answer as fatal, so it does not repeat in a loop.
    logger.warning("InitProducerId for transactional id %r from %s:%d refused with "
                   "UNSUPPORTED_VERSION: Strata does not support transactions yet",
                   transactional_id, ctx.client_host, ctx.client_port)
    return _response(version, ErrorCode.unsupported_version)


def _response(version: int, error_code: int, producer_id: int = -1, epoch: int = -1) -> Any:
    return build_response(ApiKey.INIT_PRODUCER_ID, version, throttle_time_ms=0,
                          error_code=error_code, producer_id=producer_id, producer_epoch=epoch)
