"""What the matrix produces and reads back, and the interface every client driver implements.

Values are plain and client-neutral: bytes for keys, values and header values, ints for
partitions, offsets and timestamps (ms since the epoch, CreateTime). A driver converts to and
from its client's types and nothing else: it does no checking of its own beyond raising when
its client reports an error, so every assertion about the broker lives in the tests.

Timeouts are scaled down for a broker on loopback (NOTES.md, "Keeping the suite inside CI's
time"): an answer comes in milliseconds or something is wrong, and a failing test should say so
within seconds, not after a client's 60 s default.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

Headers = tuple[tuple[str, bytes | None], ...]

CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")

# Per-operation deadlines, seconds. CONSUME covers a whole read-to-the-end.
REQUEST_TIMEOUT_S: Final = 10.0
REQUEST_TIMEOUT_MS: Final = int(REQUEST_TIMEOUT_S * 1000)
CONSUME_TIMEOUT_S: Final = 20.0
FETCH_MAX_WAIT_MS: Final = 100


@dataclass(frozen=True, slots=True)
class OutRecord:
    """A record to produce: keyed, with headers and an explicit CreateTime timestamp."""

    key: bytes
    value: bytes
    headers: Headers
    timestamp: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where the producer's delivery report says a record was appended."""

    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    def as_out_record(self) -> OutRecord:
        assert self.key is not None and self.value is not None
        return OutRecord(self.key, self.value, self.headers, self.timestamp)


@dataclass(frozen=True, slots=True)
class ProduceOptions:
    """How a driver's producer is set up: ``compression`` (one of ``CODECS``), ``idempotent``
    (``enable.idempotence``) and how many acknowledged ``rounds`` the records are sent in."""

    compression: str = "none"
    idempotent: bool = False
    rounds: int = 1

    @property
    def compression_type(self) -> str | None:
        """``compression`` as the Python clients' ``compression_type`` (None: no codec)."""
        return None if self.compression == "none" else self.compression


DEFAULT_PRODUCE: Final = ProduceOptions()


class ClientError(AssertionError):
    """A client reported an error (or timed out); the message says which call and why."""


class ClientDriver(Protocol):
    """One real client library, used the way an application would use it."""

    name: str

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create through the client's admin API; raise if the broker refuses."""

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic`` per the client's metadata, None if the topic does not exist."""

    def delete_topic(self, topic: str) -> None:
        """Delete through the client's admin API; raise if the broker refuses."""

    def produce(self, topic: str, records: Sequence[OutRecord],
                options: ProduceOptions = DEFAULT_PRODUCE) -> list[Delivery]:
        """Produce with acks=all and the client's default partitioner (keys decide), from one
        producer set up per ``options``, in ``options.rounds`` consecutive slices each
        acknowledged before the next is sent (so a partition gets several batches: sequence
        numbers advance under idempotence); the delivery report of each record, in the order
        given. Raise on any failed record."""

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[ConsumedRecord]:
        """Assign the partitions in ``end_offsets`` from the earliest offset, no group, and read
        until each partition's next offset reaches its end offset; everything read, in order
        of arrival. Raise after ``CONSUME_TIMEOUT_S``."""

    def offsets_for_times(
        self, topic: str, timestamps: Mapping[int, int]
    ) -> dict[int, int | None]:
        """ListOffsets by timestamp: per partition, the first offset whose timestamp is at or
        after the one asked, None when no record is that late."""


@dataclass
class ReadToEnd:
    """A ``consume`` in progress: the records read so far, in order of arrival, and each
    partition's next offset, until every partition reaches its end offset."""

    end_offsets: Mapping[int, int]
    records: list[ConsumedRecord] = field(default_factory=list)
    next_offset: dict[int, int] = field(init=False)
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.next_offset = dict.fromkeys(self.end_offsets, 0)
        self.deadline = time.monotonic() + CONSUME_TIMEOUT_S

    def short(self) -> bool:
        """True while some partition has not reached its end offset."""
        return any(self.next_offset[p] < end for p, end in self.end_offsets.items())

    def check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise ClientError(f"consume timed out: {self.progress()}")

    def progress(self) -> str:
        return f"next offsets {self.next_offset}, wanted {dict(self.end_offsets)}"

    def add(self, record: ConsumedRecord) -> None:
        self.records.append(record)
        self.next_offset[record.partition] = record.offset + 1


def split_rounds(records: Sequence[OutRecord], rounds: int) -> list[Sequence[OutRecord]]:
    """``records`` cut into ``rounds`` consecutive slices of (nearly) equal size."""
    size = -(-len(records) // rounds)
    return [records[i : i + size] for i in range(0, len(records), size)]


def expected_end_offsets(deliveries: Sequence[Delivery]) -> dict[int, int]:
    """Per partition, one past the largest delivered offset."""
    ends: dict[int, int] = {}
    for d in deliveries:
        ends[d.partition] = max(ends.get(d.partition, 0), d.offset + 1)
    return ends


def keyed_record(i: int, *, keys: int = 7, base_timestamp: int = 1_700_000_000_000,
                 tag: str = "") -> OutRecord:
    """Record ``i`` of a keyed sequence: key ``i % keys``, a value unique per ``(tag, i)`` (so
    each record can be found again), two headers (one text, one binary) and timestamp
    ``base_timestamp + i`` seconds."""
    return OutRecord(
        key=f"key-{i % keys}".encode(),
        value=f"value-{tag}-{i}-".encode() + bytes([i % 256]) * (i % 50),
        headers=(("trace-id", f"t{tag}{i}".encode()), ("bin", bytes([0, 255, i % 256]))),
        timestamp=base_timestamp + i * 1000,
    )


def keyed_records(
    count: int, *, keys: int = 7, base_timestamp: int = 1_700_000_000_000, tag: str = ""
) -> list[OutRecord]:
    """Records ``0 .. count - 1`` of ``keyed_record``: timestamps rise in production order."""
    return [
        keyed_record(i, keys=keys, base_timestamp=base_timestamp, tag=tag) for i in range(count)
    ]
