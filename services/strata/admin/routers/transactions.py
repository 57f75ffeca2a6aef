"""``/v1/transactions``: transactions — list, describe, abort a hanging one (KIP-664, as
``kafka-transactions.sh``), over the Kafka protocol (``strata.client.transactions``).

* ``GET /v1/transactions``: ListTransactions on every broker, filtered by ``state`` (Kafka's
  state names, repeatable; an unknown name is 400 INVALID_REQUEST), ``producer_id``
  (repeatable) and ``duration_ms`` (only transactions open longer than that);
* ``GET /v1/transactions/{transactional_id}``: DescribeTransactions at the id's coordinator;
  an id no coordinator knows is 404 TRANSACTIONAL_ID_NOT_FOUND;
* ``GET /v1/transactions/producers?topic=&partition=``: the partition's active producers
  (DescribeProducers at its leader) with each one's open transaction's first offset;
* ``GET /v1/transactions/hanging?topic=[&partition=]`` or ``?broker_id=``: kafka-transactions.sh
  ``find-hanging`` — transactions open on a partition longer than
  ``max_transaction_timeout_ms`` (default 15 min) that no coordinator tracks there;
* ``POST /v1/transactions/abort``: the transaction starting at ``start_offset`` on
  ``topic``/``partition`` (DescribeProducers at the leader), aborted with a WriteTxnMarkers
  ABORT (Kafka's ``Admin.abortTransaction``); 400 INVALID_REQUEST when no open transaction
  starts there. Answers what was aborted.

These two fixed paths are declared before ``/{transactional_id}``, so the ids ``producers``
and ``hanging`` are described with ``GET /v1/transactions?...`` filters instead.

Authorization (authentication on), Kafka's rules for these APIs: the list shows only the ids
the caller may Describe (TransactionalId), describe needs TransactionalId Describe, producers
needs Topic Read (DescribeProducers), hanging Topic Read on the topic or, by broker, Cluster
Describe; abort
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
    ActiveProducer,
    HangingTransaction,
    TransactionAbort,
    TransactionDescription,
    TransactionListing,
)
from strata.client import transactions as txn
from strata.client.kafka_errors import KafkaClientError
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


TopicQuery = Annotated[str, Query(min_length=1, max_length=249, description="Topic name.")]
PartitionQuery = Annotated[int, Query(ge=0, le=2**31 - 1, description="Partition index.")]


def _producer(p: txn.ProducerState) -> ActiveProducer:
    return ActiveProducer(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                          last_sequence=p.last_sequence, last_timestamp_ms=p.last_timestamp,
                          coordinator_epoch=p.coordinator_epoch,
                          current_txn_start_offset=p.current_txn_start_offset)


@router.get("/producers", summary="Active producers of a partition (DescribeProducers)")
async def describe_producers(gateway: GatewayDep, access: AccessDep, topic: TopicQuery,
                             partition: PartitionQuery) -> list[ActiveProducer]:
    await access.require(AclOperation.READ, ResourceType.TOPIC, topic)
    found = await gateway.call(txn.describe_producers, topic, partition)
    return [_producer(p) for p in found]


@router.get("/hanging", summary="Hanging transactions (kafka-transactions.sh find-hanging)")
async def find_hanging(
    gateway: GatewayDep, access: AccessDep,
    topic: Annotated[str | None, Query(min_length=1, max_length=249)] = None,
    partition: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    broker_id: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    max_transaction_timeout_ms: Annotated[int, Query(ge=0, le=MAX_INT64)] = (
        txn.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS),
) -> list[HangingTransaction]:
    if topic is not None:
        await access.require(AclOperation.READ, ResourceType.TOPIC, topic)
    else:
        await access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    found = await gateway.call(_hanging, topic, partition, broker_id, max_transaction_timeout_ms)
    return [HangingTransaction(topic=t.topic, partition=t.partition,
                               producer=_producer(t.producer)) for t in found]


async def _hanging(target: txn.Target, topic: str | None, partition: int | None,
                   broker_id: int | None, max_transaction_timeout_ms: int
                   ) -> list[txn.OpenTransaction]:
    if (topic is None) == (broker_id is None) or (partition is not None and topic is None):
        raise KafkaClientError("INVALID_REQUEST", "give either topic (with an optional "
                               "partition) or broker_id", subject="", api="find-hanging")
    return await txn.find_hanging(target, broker_id=broker_id, topic=topic, partition=partition,
                                  max_transaction_timeout_ms=max_transaction_timeout_ms)


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
