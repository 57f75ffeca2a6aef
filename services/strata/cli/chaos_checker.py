"""The fault campaign's checker: what the producers were told against what the log holds.

Pure code (no sockets, files or clocks): the campaign hands it the delivery reports, the full
read of the topic after healing, the fatal producer errors, each replica's records and what the
group consumer consumed; it returns a ``CheckResult`` whose counters are the summary table.

Every value the workload writes is unique and names its writer: ``chaos-p<P>-i<I>-<S>`` where P
is the producer, I its incarnation (a producer that hit a fatal error is replaced by a new
one, I + 1: a new producer id, so ordering is only promised within one incarnation) and S the
sequence number the incarnation gave the record (0, 1, 2, ... in ``produce()`` order).

Definitions (a record is *acknowledged* when its delivery report carried no error):

* **lost** — an acknowledged value that the full read does not contain at all.
* **duplicated** — a value (acknowledged or not) that the full read contains more than once;
  each extra copy counts once. An idempotent producer must never duplicate.
* **wrong offset** — an acknowledged value that the full read contains, but not at the
  partition and offset its delivery report named (the broker acknowledged one offset and the
  log holds the record at another: a consumer that stored the offset reads something else).
  A report without an offset (librdkafka's idempotent producer acknowledges a batch whose
  request timed out once a later batch of the partition succeeds, offset unknown) is only
  counted as *acknowledged without offset* (informational): it can be lost, never misplaced.
* **reordered** — per producer incarnation per partition, in offset order of the full read
  (first copies only), a record whose sequence number is smaller than one before it.
* **fatal producer errors** — producer incarnations that hit a librdkafka error with
  ``fatal() == True`` (the idempotent producer's OUT_OF_ORDER_SEQUENCE_NUMBER "sequence
  desynchronization", fencing, ...); the workload reports one per incarnation.
* **divergent partitions** — partitions where some in-sync replica's records below the high
  watermark differ from the leader's read (a missing offset, another value at an offset).
* **group misses** — acknowledged values the consumer group never consumed (at-least-once).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

VALUE_PATTERN = re.compile(rb"^chaos-p(\d+)-i(\d+)-(\d+)$")


def make_value(producer: int, incarnation: int, sequence: int) -> bytes:
    """The unique value of record ``sequence`` of ``producer``'s ``incarnation``."""
    return b"chaos-p%d-i%d-%d" % (producer, incarnation, sequence)


@dataclass(frozen=True, slots=True, order=True)
class ValueId:
    """Who wrote a value and in which position: (producer, incarnation, sequence)."""

    producer: int
    incarnation: int
    sequence: int


def parse_value(value: bytes | None) -> ValueId | None:
    """The writer of a workload value; ``None`` for anything else (not ours)."""
    if value is None:
        return None
    match = VALUE_PATTERN.match(value)
    if match is None:
        return None
    return ValueId(int(match[1]), int(match[2]), int(match[3]))


@dataclass(frozen=True, slots=True)
class Delivery:
    """One successful delivery report: the broker acknowledged ``value`` at (partition, offset);
    ``offset`` None when librdkafka did not learn it."""

    partition: int
    offset: int | None
    value: bytes


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record of a read: its partition, offset and value."""

    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    """One replica's records of one partition below the high watermark (from its log files)."""

    broker: int
    partition: int
    in_isr: bool
    records: Mapping[int, bytes | None]  # offset -> value


@dataclass
class CheckResult:
    """The verdict; every list holds the evidence behind its counter (capped by the caller)."""

    acknowledged: int = 0
    read: int = 0
    lost: list[Delivery] = field(default_factory=list)
    duplicated: list[tuple[bytes, list[tuple[int, int]]]] = field(default_factory=list)
    wrong_offset: list[tuple[Delivery, list[tuple[int, int]]]] = field(default_factory=list)
    reordered: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)
    fatal_errors: list[str] = field(default_factory=list)
    divergent: dict[int, list[str]] = field(default_factory=dict)
    group_misses: list[Delivery] = field(default_factory=list)
    without_offset: int = 0
    group_checked: bool = False
    replicas_checked: bool = False

    @property
    def duplicate_copies(self) -> int:
        return sum(len(places) - 1 for _, places in self.duplicated)

    def ok(self) -> bool:
        """True when every counter of the table is zero."""
        return not (self.lost or self.duplicated or self.wrong_offset or self.reordered
                    or self.fatal_errors or self.divergent or self.group_misses)

    def counters(self) -> dict[str, int]:
        """The table's correctness columns, in order."""
        return {
            "acknowledged": self.acknowledged,
            "acknowledged without offset": self.without_offset,
            "read": self.read,
            "lost": len(self.lost),
            "duplicated": self.duplicate_copies,
            "reordered": len(self.reordered),
            "wrong offset": len(self.wrong_offset),
            "fatal producer errors": len(self.fatal_errors),
            "divergent partitions": len(self.divergent),
            "group misses": len(self.group_misses),
        }


def places_by_value(read: Iterable[StoredRecord]) -> dict[bytes, list[tuple[int, int]]]:
    """Every (partition, offset) at which each value appears, in read order."""
    places: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for record in read:
        if record.value is not None:
            places[record.value].append((record.partition, record.offset))
    return places


def find_reorders(read: Sequence[StoredRecord]) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, offset, value, the larger value before it) for each out-of-order record.

    Per producer incarnation per partition in offset order, first copies only.
    """
    seen: set[bytes] = set()
    highest: dict[tuple[int, int, int], tuple[int, bytes]] = {}
    out: list[tuple[int, int, bytes, bytes]] = []
    for record in sorted(read, key=lambda r: (r.partition, r.offset)):
        ident = parse_value(record.value)
        if ident is None or record.value is None or record.value in seen:
            continue
        seen.add(record.value)
        key = (record.partition, ident.producer, ident.incarnation)
        before = highest.get(key)
        if before is not None and ident.sequence < before[0]:
            out.append((record.partition, record.offset, record.value, before[1]))
        elif before is None or ident.sequence > before[0]:
            highest[key] = (ident.sequence, record.value)
    return out


def find_divergence(read: Sequence[StoredRecord], replicas: Iterable[ReplicaRead],
                    high_watermarks: Mapping[int, int]) -> dict[int, list[str]]:
    """Partitions whose in-sync replicas do not all hold the read's records below the high
    watermark, with one line of evidence per differing replica (first differing offset)."""
    reference: dict[int, dict[int, bytes | None]] = defaultdict(dict)
    for record in read:
        reference[record.partition][record.offset] = record.value
    divergent: dict[int, list[str]] = defaultdict(list)
    for replica in replicas:
        if not replica.in_isr:
            continue
        hw = high_watermarks.get(replica.partition, 0)
        expected = {o: v for o, v in reference[replica.partition].items() if o < hw}
        actual = {o: v for o, v in replica.records.items() if o < hw}
        if expected == actual:
            continue
        differing = sorted(o for o in expected.keys() | actual.keys()
                           if expected.get(o, b"<missing>") != actual.get(o, b"<missing>"))
        first = differing[0]
        divergent[replica.partition].append(
            f"broker {replica.broker}: {len(differing)} offsets differ below HW {hw}, first "
            f"{first}: read {expected.get(first, b'<missing>')!r}, replica "
            f"{actual.get(first, b'<missing>')!r}")
    return dict(divergent)


def check(deliveries: Sequence[Delivery], read: Sequence[StoredRecord],
          fatal_errors: Sequence[str] = (),
          replicas: Sequence[ReplicaRead] | None = None,
          high_watermarks: Mapping[int, int] | None = None,
          group_consumed: set[bytes] | None = None) -> CheckResult:
    """Compare the delivery reports with the full read (see the module's definitions).

    ``replicas`` (with ``high_watermarks``) enables the divergence check and ``group_consumed``
    the consumer-group check; left ``None`` they are reported as not checked.
    """
    result = CheckResult(acknowledged=len(deliveries), read=len(read),
                         fatal_errors=list(fatal_errors))
    places = places_by_value(read)
    for delivery in deliveries:
        where = places.get(delivery.value)
        if delivery.offset is None or delivery.offset < 0:
            result.without_offset += 1
        if not where:
            result.lost.append(delivery)
        elif delivery.offset is not None and delivery.offset >= 0 \
                and (delivery.partition, delivery.offset) not in where:
            result.wrong_offset.append((delivery, list(where)))
    copies = Counter({value: len(where) for value, where in places.items()})
    result.duplicated = [(value, places[value]) for value, n in copies.items() if n > 1]
    result.reordered = find_reorders(read)
    if replicas is not None:
        result.replicas_checked = True
        result.divergent = find_divergence(read, replicas, high_watermarks or {})
    if group_consumed is not None:
        result.group_checked = True
        result.group_misses = [d for d in deliveries if d.value not in group_consumed]
    return result
