"""What the producer state knows of one producer id (Kafka's ``ProducerStateEntry``,
``BatchMetadata``, ``TxnMetadata`` and ``CompletedTxn``) and the sequence arithmetic.

A ``ProducerStateEntry`` holds the producer epoch, the metadata of the last five batches
(``BatchMetadata``: sequence range, offsets, timestamp), the time of its last write, the epoch
of the coordinator that wrote its last transaction marker, and ``current_txn_first_offset``:
the first offset of its transaction still open (-1 when none). A transactional data batch sets
it if unset; an ABORT/COMMIT marker clears it, and if it was set that completes the
transaction: a ``CompletedTxn`` (producer, first offset, marker offset, aborted?).

Invariant: a new epoch forgets the batches of the old one, never the open transaction (an epoch
bump mid-transaction continues it, as in Kafka). Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from strata.storage.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = (1 << 31) - 1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` in the sequence space that wraps at 2**31 (Kafka's rule)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: what a duplicate is answered with."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def batch_deque(batches: Iterable[BatchMetadata] = ()) -> deque[BatchMetadata]:
    return deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction an ABORT/COMMIT marker ended: its producer, first data offset, the
    marker's offset, whether it aborted, and the last stable offset right after the marker
    (Kafka's ``ProducerStateManager.lastStableOffset(completedTxn)``: the first offset of the
    earliest other open transaction, else the marker's offset + 1)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int = NO_OFFSET


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id: its epoch, its last (up to five) batches oldest first, and its
    transaction (module docstring)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = NO_TIMESTAMP
    batch_metadata: deque[BatchMetadata] = field(default_factory=batch_deque)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one. True if the epoch changed."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batch_metadata.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(header.base_sequence, header.last_sequence)
