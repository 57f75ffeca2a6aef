"""Values a ``Log`` returns: what an append did, what a read found, what a time lookup found.

Immutable results, shared by the storage core and the broker's handlers. ``LogAppendInfo`` is a
NamedTuple because one is built per produce request on the hot path. The ListOffsets sentinel
timestamps are Kafka's (``ListOffsetsRequest.EARLIEST_TIMESTAMP`` and friends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from strata.storage.file_records import FileSlice

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023
# Without tiered storage both answer offset -1, timestamp -1, leader epoch -1 (Kafka's answer
# when remote storage is not enabled).
NOTHING_TIERED = (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP)


class LogAppendInfo(NamedTuple):
    """What an append did. For a duplicate idempotent batch, the original batch's offsets.

    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """A read: file slices ready for ``os.sendfile`` (may end inside a batch, like Kafka).
    ``aborted_transactions``: (producer id, first offset) of the aborted transactions a
    read_committed read overlaps (Fetch's ``aborted_transactions``); None for other reads."""

    fetch_offset: int
    slices: tuple[FileSlice, ...]
    aborted_transactions: tuple[tuple[int, int], ...] | None = None

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        return b"".join(s.read_bytes() for s in self.slices)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None
