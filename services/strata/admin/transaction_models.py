"""The admin API's transaction documents (``/v1/transactions``): pydantic models, Kafka's names.

``TransactionListing`` (ListTransactions), ``TransactionDescription`` (DescribeTransactions),
``TransactionAbort`` (the body of an abort: the transaction that starts at ``start_offset`` on
one partition, as ``kafka-transactions.sh abort --start-offset``) and ``AbortedTransaction``
(what was aborted: the producer, its epoch and the coordinator epoch the marker carried).
Request bodies forbid unknown fields (``Strict``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from strata.admin.models import Strict, TopicName, TopicPartitionRef


class TransactionListing(BaseModel):
    transactional_id: str
    coordinator: int = Field(description="The broker that coordinates the id.")
    producer_id: int
    state: str = Field(description="Kafka's state name (Ongoing, PrepareCommit, ...).")


class TransactionDescription(BaseModel):
    transactional_id: str
    coordinator: int
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None = Field(
        description="When the current transaction started (None: no transaction open).")
    transaction_duration_ms: int | None
    partitions: list[TopicPartitionRef] = Field(
        description="The partitions of the open transaction, or those whose marker is not "
                    "written yet while it commits or aborts.")


class TransactionAbort(Strict):
    topic: TopicName
    partition: int = Field(ge=0, le=2**31 - 1)
    start_offset: int = Field(ge=0, description="The first offset of the transaction to abort "
                                                "(DescribeProducers' current_txn_start_offset).")


class AbortedTransaction(BaseModel):
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class ActiveProducer(BaseModel):
    """One active producer of a partition (DescribeProducers); -1 for "none" as Kafka says."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int = Field(
        description="The first offset of its open transaction here, -1 outside one.")


class HangingTransaction(BaseModel):
    """A transaction open on a partition that its coordinator no longer tracks there."""

    topic: str
    partition: int
    producer: ActiveProducer
