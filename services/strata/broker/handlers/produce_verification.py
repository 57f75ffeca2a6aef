"""Transaction verification of a Produce request (KIP-890), before its append.

Kafka's ``ReplicaManager.handleProduceAppend``: with ``transaction.partition.verification.enable``
(default true), each partition led here that receives a transactional batch of a producer with
no open transaction on it gets a verification guard (``Log.maybe_start_transaction_verification``)
and the producer's transaction coordinator is asked, in one request, whether those partitions
are in the transaction — or, for a transactions v2 client (Produce v12+), to add them
(``AddPartitionsToTxnManager``). A partition that fails is answered with the translated error
(``transaction_verification.produce_error``: INVALID_TXN_STATE "Partition was not added to the
transaction", NOT_ENOUGH_REPLICAS for the retriable ones, INVALID_PRODUCER_EPOCH when fenced)
and not appended; the others are appended with their guards, which the log checks again: a
marker that landed while the coordinator answered voids the guard (the append is then
INVALID_TXN_STATE), so a late produce can never open a transaction the coordinator does not
know — no hanging transaction.

Transactional batches of more than one producer in one request: INVALID_PRODUCER_ID_MAPPING for
every partition (Kafka's rule). Batches this function cannot read (not magic v2, short) are left
to the log's validator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from strata.broker.broker_state import BrokerState
from strata.broker.replication.partition_results import PartitionAppendResult
from strata.broker.transaction.transaction_verification import (
    operation_for_produce,
    produce_error,
)
from strata.protocol.error_codes import ErrorCode
from strata.storage.errors import CorruptRecordError, StorageError
from strata.storage.record_batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MAGIC_V2,
    TRANSACTIONAL_FLAG_MASK,
    parse_header,
)
from strata.storage.verification_state import SENTINEL_GUARD

TopicPartition = tuple[str, int]
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1
_MORE_THAN_ONE_PRODUCER = PartitionAppendResult(
    ErrorCode.invalid_producer_id_mapping,
    error_message="Transactional records contained more than one producer ID")


class Verification(NamedTuple):
    """What the append needs: the refused entries (by index) and every partition's guard
    (None: verification not in use for this request)."""

    refused: dict[int, PartitionAppendResult]
    guards: dict[TopicPartition, int] | None


NOT_VERIFIED = Verification({}, None)


async def verify_produce(state: BrokerState, transactional_id: str | None, version: int,
                         entries: Sequence[tuple[TopicPartition, bytes]]) -> Verification:
    """See the module docstring; ``entries`` are the partitions about to be appended."""
    runtime = state.transaction_coordinator
    if transactional_id is None or not runtime.config.partition_verification_enable:
        return NOT_VERIFIED
    producers: set[tuple[int, int]] = set()
    candidates: list[tuple[TopicPartition, int, int, int]] = []  # tp, pid, epoch, sequence
    for tp, records in entries:
        if (len(records) < HEADER_SIZE or records[MAGIC_OFFSET] != MAGIC_V2
                or not records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK):
            continue
        try:
            header = parse_header(records)
        except CorruptRecordError:
            continue  # the log's validator answers it
        if header.producer_id < 0:
            continue
        producers.add((header.producer_id, header.producer_epoch))
        candidates.append((tp, header.producer_id, header.producer_epoch, header.base_sequence))
    if not candidates:
        return NOT_VERIFIED
    if len(producers) > 1:
        return Verification(dict.fromkeys(range(len(entries)), _MORE_THAN_ONE_PRODUCER), {})
    [(producer_id, producer_epoch)] = producers
    guards: dict[TopicPartition, int] = {}
    for tp, pid, epoch, sequence in candidates:
        partition = state.replica_manager.get_partition(*tp)
        if partition is None or not partition.is_leader:
            continue  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
        try:
            guard = partition.log.maybe_start_transaction_verification(pid, sequence, epoch)
        except StorageError:
            continue  # the append answers the storage error
        if guard != SENTINEL_GUARD:
            guards[tp] = guard
    if not guards:
        return Verification({}, guards)
    operation = operation_for_produce(version, runtime.config.transaction_version)
    failed = await state.add_partitions_to_txn.verify_transaction(
        transactional_id, producer_id, producer_epoch, guards, operation)
    refused: dict[int, PartitionAppendResult] = {}
    for index, (tp, _) in enumerate(entries):
        error = failed.get(tp)
        if error is not None:
            code, message = produce_error(error)
            refused[index] = PartitionAppendResult(code, error_message=message)
    return Verification(refused, guards)
