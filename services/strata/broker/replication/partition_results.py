"""What the replica manager is asked and answers per partition: Kafka's per-partition request
and response shapes of Produce, Fetch and DeleteRecords, as plain values.

Pure data. Invariant (Kafka's rule): with an error, a result's offsets are -1 — but for
DeleteRecords' REQUEST_TIMED_OUT, which keeps the low watermark the request found, as Kafka's
``DelayedDeleteRecords`` answers.
"""

from __future__ import annotations

from typing import NamedTuple

from strata.storage.file_records import FileSlice


class PartitionAppendResult(NamedTuple):
    """One partition of a produce: Kafka's ``PartitionResponse``."""

    error_code: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch_index, message), KIP-467


class PartitionFetchInfo(NamedTuple):
    """One partition of a fetch request."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's own (Fetch v5+), recorded by the leader


class FetchPartitionResult(NamedTuple):
    """One partition of a fetch response. Offsets are -1 with an error (Kafka's rule)."""

    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: tuple[FileSlice, ...] = ()
    size: int = 0
    # read_committed: (producer id, first offset) of the aborted transactions the records
    # overlap; None for other reads (the response then says empty or null by isolation).
    aborted_transactions: tuple[tuple[int, int], ...] | None = None


class DeleteRecordsResult(NamedTuple):
    """One partition of a DeleteRecords: the low watermark (the smallest log start offset of
    the leader and its live followers, ``delayed_delete_records``) once it reached the offset
    asked for."""

    error_code: int
    low_watermark: int = -1
