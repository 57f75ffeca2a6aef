"""``/v1/transactions``: transactions — list, describe, abort a hanging one (KIP-664, as
``kafka-transactions.sh``), over the Kafka protocol (``strata.client.transactions``).

* ``GET /v1/transactions``: ListTransactions on every broker, filtered by ``state`` (Kafka's
  state names, repeatable; an unknown name is 400 INVALID_REQUEST), ``producer_id``
  (repeatable) and ``duration_ms`` (only transactions open longer than that);
* ``GET /v1/transactions/{transactional_id}``: DescribeTransactions at the id's coordinator;
  an id no coordinator knows is 404 TRANSACTIONAL_ID_NOT_FOUND;
* ``POST /v1/transactions/abort``: the transaction starting at ``start_offset`` on
  ``topic``/``partition`` (DescribeProducers at the leader), aborted with a WriteTxnMarkers
  ABORT (Kafka's ``Admin.abortTransaction``); 400 INVALID_REQUEST when no open transaction
  starts there. Answers what was aborted.

Authorization (authentication on), Kafka's rules for these APIs: the list shows only the ids
the caller may Describe (TransactionalId), describe needs TransactionalId Describe, abort
needs Topic Write on the partition's topic and ClusterAction on the cluster (WriteTxnMarkers
is a broker-to-broker API).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import Field

from strata.admin.models import TopicPartitionRef
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.admin.transaction_models import (
    AbortedTransaction,
    TransactionAbort,
    TransactionDescription,
    TransactionListing,
)
from strata.client import transactions as txn
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix="/v1/transactions", tags=["transactions"], responses=PROBLEMS)

MAX_INT64 = 2**63 - 1
ProducerId = Annotated[int, Field(ge=0, le=MAX_INT64)]
# Kafka strings are at most 32767 bytes: 8191 characters fit in any UTF-8 encoding.
TransactionalIdPath = Annotated[str, Path(min_length=1, max_length=8191,
                                          description="Transactional id.")]


@router.get("", summary="Transactions of every coordinator")
async def list_transactions(
    gateway: GatewayDep, access: AccessDep,
    state: Annotated[list[str] | None, Query(description="Kafka's state name; repeatable.")
                     ] = None,
    producer_id: Annotated[list[ProducerId] | None, Query(description="Repeatable.")] = None,
    duration_ms: Annotated[int, Query(ge=-1, le=MAX_INT64,
                                      description="Only transactions open longer than this "
                                                  "(-1: all).")] = -1,
) -> list[TransactionListing]:
    listed = await gateway.call(_list, state or [], producer_id or [], duration_ms)
    rows = [TransactionListing(transactional_id=t.transactional_id,
                               coordinator=t.coordinator_id, producer_id=t.producer_id,
                               state=t.state) for t in listed]
    if access.unrestricted:
        return rows
    return [row for row in rows if await access.allowed(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, row.transactional_id)]


async def _list(target: txn.Target, states: list[str], producer_ids: list[int],
                duration_ms: int) -> list[txn.TransactionListing]:
    return await txn.list_transactions(target, states=states, producer_ids=producer_ids,
                                       duration_ms=duration_ms)


@router.get("/{transactional_id}", summary="State, producer and partitions of one id")
async def get_transaction(gateway: GatewayDep, access: AccessDep,
                          transactional_id: TransactionalIdPath) -> TransactionDescription:
    await access.require(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    found = await gateway.call(txn.describe_transaction, transactional_id)
    start = found.transaction_start_time_ms
    return TransactionDescription(
        transactional_id=found.transactional_id, coordinator=found.coordinator_id,
        producer_id=found.producer_id, producer_epoch=found.producer_epoch, state=found.state,
        transaction_timeout_ms=found.transaction_timeout_ms, transaction_start_time_ms=start,
        transaction_duration_ms=None if start is None else int(time.time() * 1000) - start,
        partitions=[TopicPartitionRef(topic=t, partition=p) for t, p in found.topic_partitions])


@router.post("/abort", summary="Abort the transaction that starts at an offset of a partition")
async def abort_transaction(gateway: GatewayDep, access: AccessDep,
                            body: TransactionAbort) -> AbortedTransaction:
    await access.require(AclOperation.WRITE, ResourceType.TOPIC, body.topic)
    await access.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    spec = await gateway.call(txn.abort_spec, body.topic, body.partition, body.start_offset)
    await gateway.call(txn.abort_transaction, spec)
    return AbortedTransaction(topic=spec.topic, partition=spec.partition,
                              producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                              coordinator_epoch=spec.coordinator_epoch)
