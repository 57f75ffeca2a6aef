"""What survives a cleaning round, batch by batch (Kafka's ``Cleaner.shouldRetainRecord`` and
``MemoryRecords.filterTo``).

Step 4 of a round (``cleaner``) passes every batch of the segments being rewritten, in offset
order, through one ``BatchFilter``; ``filter_batch`` rebuilds one batch from the records kept.

Retention rules (``BatchFilter``, Kafka's):

* a record past the map (``offset > map.latest_offset``) is kept as it is;
* a record without a key is dropped (a compacted topic refuses them on produce);
* a record is kept only if its offset is the latest of its key;
* a tombstone (null value) is kept until its batch's *delete horizon*: the first round that keeps
  it stamps ``now + delete.retention.ms`` into the batch (attribute bit 6 ``hasDeleteHorizonMs``;
  the horizon becomes the ``baseTimestamp``, KIP-534), the first round after the horizon drops
  it. Consumers thus see a tombstone for at least ``delete.retention.ms`` after it was cleaned;
* records of aborted transactions are dropped; a transaction marker goes once no batch of its
  transaction is left, after a delete horizon of its own (``transaction_scan``);
* a batch left without records disappears, except that it stays as an empty batch (header only,
  ``recordsCount`` 0, same ``baseOffset``, ``lastOffsetDelta`` and producer fields) when it is
  the last batch of a producer the log's producer state still knows (idempotence needs its last
  sequence and epoch; until ``producer.id.expiration.ms``) or ends the cleanable range (the log
  keeps its last offset);
* a batch that loses nothing and gains no horizon is copied byte for byte (compression kept);
  a rebuilt batch keeps its codec, timestamp type, leader epoch and producer fields.

Invariants: every surviving record keeps its offset; a delete horizon once stamped is never moved.

Pure: bytes in, bytes out. A ``BatchFilter``'s state is the round's offset map (read only), its
transaction tracker and clock reading (``now_ms``); one per round, used by the cleaner's worker
thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from strata.storage import record_batch as rb
from strata.storage.offset_map import OffsetMap
from strata.storage.records import Record, build_batch, iter_records
from strata.storage.transaction_scan import (
    AbortedTxn,
    LastRecord,
    TransactionTracker,
    control_type,
)

if TYPE_CHECKING:
    from strata.storage.cleaner import CleanerStats

Buffer = bytes | bytearray | memoryview


def delete_horizon_ms(header: rb.BatchHeader) -> int | None:
    """The batch's delete horizon (attribute bit 6 set: its ``baseTimestamp``), else None."""
    if header.attributes & rb.DELETE_HORIZON_FLAG_MASK:
        return header.base_timestamp
    return None


def filter_batch(
    batch: Buffer,
    retain: Callable[[Record], bool],
    *,
    retain_empty: bool = False,
    new_delete_horizon_ms: int | None = None,
) -> bytes | None:
    """The batch with only the records ``retain`` accepts, each at its original offset.

    * Every record kept and nothing to stamp: the original bytes (codec and CRC untouched).
    * Some kept: a rebuilt batch with the same ``baseOffset``, ``lastOffsetDelta``, codec,
      timestamp type, partition leader epoch, producer id/epoch/base sequence and
      transactional/control flags; ``recordsCount`` and ``maxTimestamp`` follow the survivors.
    * None kept: ``None``; with ``retain_empty`` a header-only batch (``recordsCount`` 0,
      uncompressed, ``baseTimestamp = maxTimestamp`` = the original's) that keeps the offsets and
      producer fields (Kafka's ``RETAIN_EMPTY``).

    ``new_delete_horizon_ms``: if the batch has no delete horizon yet and keeps a tombstone (or
    is a control batch), it is rebuilt with this horizon (attribute bit 6). A horizon already
    present is kept.
    """
    header = rb.parse_header(batch)
    kept: list[Record] = []
    dropped = False
    tombstone = False
    for record in iter_records(batch, verify_crc=False):
        if retain(record):
            kept.append(record)
            tombstone = tombstone or record.value is None
        else:
            dropped = True
    horizon = delete_horizon_ms(header)
    stamp = (
        horizon is None
        and new_delete_horizon_ms is not None
        and bool(kept)
        and (tombstone or header.is_control)
    )
    if not dropped and not stamp:
        return bytes(batch[: header.size])
    if not kept:
        if not retain_empty:
            return None
        return build_batch(
            [],
            base_offset=header.base_offset,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            timestamp_type=header.timestamp_type,
            base_timestamp=header.max_timestamp,
            last_offset_delta=header.last_offset_delta,
        )
    return build_batch(
        kept,
        base_offset=header.base_offset,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        timestamp_type=header.timestamp_type,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=new_delete_horizon_ms if stamp else horizon,
    )


class BatchFilter:
    """One round's retention decisions (module docstring), fed the batches in offset order.

    Pure: state is the offset map, the transaction tracker and the round's clock reading.
    ``last_records`` are the producers whose last batch must survive (``ProducerScan``).
    ``upper_bound_offset`` is the round's ``first_uncleanable``: the batch ending there stays.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        delete_retention_ms: int,
        aborted: Iterable[AbortedTxn] = (),
        last_records: Mapping[int, LastRecord] | None = None,
        upper_bound_offset: int = -1,
        stats: CleanerStats | None = None,
    ) -> None:
        self.map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.transactions = TransactionTracker(aborted)
        self.last_records = last_records or {}
        self.upper_bound_offset = upper_bound_offset
        if stats is None:
            from strata.storage.cleaner import CleanerStats  # cleaner imports this module

            stats = CleanerStats()
        self.stats = stats

    def _is_last_batch_of_producer(self, header: rb.BatchHeader) -> bool:
        last = self.last_records.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def should_retain_record(self, header: rb.BatchHeader, record: Record) -> bool:
        """Kafka's ``Cleaner.shouldRetainRecord`` for a data record."""
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages_read += 1
            return False
        if record.offset < self.map.get(record.key):
            return False
        if record.value is not None:
            return True
        horizon = delete_horizon_ms(header)
        return horizon is None or self.now_ms < horizon

    def filter(self, batch: Buffer) -> bytes | None:
        """The batch as it goes into the cleaned segment, or None to drop it."""
        header = rb.parse_header(batch)
        self.stats.messages_read += header.records_count
        self.stats.bytes_read += header.size
        if header.is_control:
            marker = control_type(batch)
            can_discard = self.transactions.on_control_batch_read(header, marker)
            horizon = delete_horizon_ms(header)
            discard_records = can_discard and horizon is not None and horizon <= self.now_ms
        else:
            can_discard = self.transactions.on_batch_read(header)
            discard_records = can_discard
        retain_empty = (
            header.has_producer_id and self._is_last_batch_of_producer(header)
        ) or header.next_offset == self.upper_bound_offset
        if discard_records and not retain_empty:
            return None

        def retain(record: Record) -> bool:
            if discard_records:
                return False
            if header.is_control:
                return True
            return self.should_retain_record(header, record)

        stamp = not header.is_control or can_discard
        out = filter_batch(
            batch,
            retain,
            retain_empty=retain_empty,
            new_delete_horizon_ms=self.now_ms + self.delete_retention_ms if stamp else None,
        )
        if out is not None:
            self.stats.messages_written += rb.parse_header(out).records_count
            self.stats.bytes_written += len(out)
        return out
