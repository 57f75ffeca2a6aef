"""Producer and transaction facts a cleaning round needs (Kafka's ``AbortedTxn``, ``LastRecord``,
``lastRecordsOfActiveProducers`` and ``CleanedTransactionMetadata``).

Step 2 of a round (``cleaner``): a header scan of the whole log (``ProducerScan``) finds every
aborted transaction (producer id, first offset, abort marker offset), each producer's last data
batch and epoch, and the transactions still open; the first offset of the earliest open one lowers
``first_uncleanable`` (an open transaction is never cleaned).

The offset-map and rewrite passes each feed a ``TransactionTracker`` the batches they read: it says
which data batches belong to an aborted transaction (they never enter the offset map and are
dropped) and when a transaction marker has no batch of its transaction left, so that the marker
may go after a delete horizon of its own (``batch_filter``).

Invariants: both are fed batch headers in offset order, each batch once per pass; batches without
a producer id are ignored by ``ProducerScan`` and are never transactional; a control batch without
records (emptied by an earlier round) counts as a marker whose transaction is gone.

Pure: no I/O (``control_type`` parses a batch already read). One ``ProducerScan`` and one tracker
per pass, used by the cleaner's worker thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strata.storage import record_batch as rb
from strata.storage.records import ControlRecordType, iter_records, parse_control_key
from strata.storage.transaction_index import AbortedTxn  # the .txnindex entry (lso unknown here)

__all__ = ["AbortedTxn", "LastRecord", "ProducerScan", "TransactionTracker", "control_type"]

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A producer's last data batch (its last offset) and epoch (Kafka's ``LastRecord``).

    ``last_data_offset`` is None when the producer's latest entry is a marker of a newer epoch
    (its data batches belong to a fenced epoch); the marker then carries the state to keep.
    """

    last_data_offset: int | None
    producer_epoch: int


def control_type(batch: Buffer, pos: int = 0) -> int | None:
    """The type of the control batch's first record (``ControlRecordType``), None if empty."""
    for record in iter_records(batch, pos, verify_crc=False):
        return parse_control_key(record.key)[1]
    return None


class ProducerScan:
    """Producer facts of a whole log, fed every batch header in offset order.

    ``aborted``: aborted transactions; ``last_records``: per producer id the last data batch and
    epoch (Kafka's ``lastRecordsOfActiveProducers``, without producer expiry);
    ``first_unstable_offset``: first offset of the earliest transaction still open, or None.
    """

    def __init__(self) -> None:
        self.aborted: list[AbortedTxn] = []
        self.last_records: dict[int, LastRecord] = {}
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def on_batch(self, header: rb.BatchHeader, marker: int | None = None) -> None:
        """``marker``: the control type of a control batch (``control_type``)."""
        pid = header.producer_id
        if pid < 0:
            return
        previous = self.last_records.get(pid)
        same_epoch = previous is not None and previous.producer_epoch == header.producer_epoch
        if header.is_control:
            first = self._open.pop(pid, None)
            if marker == ControlRecordType.ABORT and first is not None:
                self.aborted.append(AbortedTxn(pid, first, header.last_offset))
            last_data = previous.last_data_offset if same_epoch and previous else None
            self.last_records[pid] = LastRecord(last_data, header.producer_epoch)
            return
        if header.is_transactional:
            self._open.setdefault(pid, header.base_offset)
        self.last_records[pid] = LastRecord(header.last_offset, header.producer_epoch)

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self._open.values()) if self._open else None


class TransactionTracker:
    """Which batches of aborted transactions to drop and which markers may go (Kafka's
    ``CleanedTransactionMetadata``), fed the batches of one pass in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._aborted: dict[int, list[AbortedTxn]] = {}
        for txn in sorted(aborted, key=lambda t: t.first_offset):
            self._aborted.setdefault(txn.producer_id, []).append(txn)
        self._aborted_seen: set[int] = set()  # producers whose aborted txn still has batches
        self._committed_seen: set[int] = set()  # producers whose open txn still has batches

    def _is_aborted(self, pid: int, offset: int) -> bool:
        return any(t.first_offset <= offset <= t.last_offset for t in self._aborted.get(pid, ()))

    def on_batch_read(self, header: rb.BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction (drop it)."""
        if not header.is_transactional:
            return False
        pid = header.producer_id
        if self._is_aborted(pid, header.base_offset):
            self._aborted_seen.add(pid)
            return True
        self._committed_seen.add(pid)
        return False

    def on_control_batch_read(self, header: rb.BatchHeader, marker: int | None) -> bool:
        """A control batch was read; True if no batch of its transaction is left (it may go)."""
        pid = header.producer_id
        if marker is None:  # already emptied by an earlier round
            return True
        if marker == ControlRecordType.ABORT:
            seen = pid in self._aborted_seen
            self._aborted_seen.discard(pid)
            return not seen
        if marker == ControlRecordType.COMMIT:
            seen = pid in self._committed_seen
            self._committed_seen.discard(pid)
            return not seen
        return False
