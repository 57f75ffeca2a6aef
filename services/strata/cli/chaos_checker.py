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
  each extra copy counts once. An idempotent producer must never duplicate — within one
  producer epoch: sequence numbers are per (producer id, epoch) (KIP-98, KIP-360), so a record
  the client itself sends again under a bumped epoch is a new record to any broker, Kafka's
  included. Copies written by one producer id under epochs that rise with the offset (read from
  the batch headers) are counted apart, as *re-sent by the client under a new producer epoch*
  (informational) when no delivery report acknowledged an earlier copy: librdkafka's
  idempotent producer bumps its epoch on an OUT_OF_ORDER_SEQUENCE_NUMBER that only follows an
  earlier failed request and then re-sends messages whose first send was possibly persisted
  (confluentinc/librdkafka#4953; the Java client re-enqueues without a bump). Any other
  duplicate — same epoch, another producer id, another partition, a copy whose writer no
  replica shows, a copy after the acknowledged one — counts as duplicated.
* **sequence breaks** — per partition, in offset order, the records one (producer id, epoch)
  wrote must carry consecutive sequence numbers: a gap or a repeat is a batch the broker's
  idempotence check should have refused (a missed duplicate shows here too).
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
* **commit regressions** — times the group consumer, given a partition (after a reopen or a
  rebalance), resumed it below an offset commit the coordinator had acknowledged for it: an
  acknowledged commit taken back (``Resume``, ``find_commit_regressions``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Writer = tuple[int, int, int]  # (producer id, producer epoch, sequence) from a batch header
Place = tuple[int, int]  # (partition, offset)

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
    writers: Mapping[int, Writer] = field(default_factory=dict)  # offset -> who wrote it


@dataclass(frozen=True)
class Resume:
    """The group consumer's first record of ``partition`` after it was assigned: at
    ``offset``, while the latest commit acknowledged for the partition by then was
    ``acknowledged`` (-1: none; commits are last-writer-wins, so the latest is in force)."""

    partition: int
    offset: int
    acknowledged: int


@dataclass
class CheckResult:
    """The verdict; every list holds the evidence behind its counter (capped by the caller)."""

    acknowledged: int = 0
    read: int = 0
    lost: list[Delivery] = field(default_factory=list)
    duplicated: list[tuple[bytes, list[Place]]] = field(default_factory=list)
    resent: list[tuple[bytes, list[Place]]] = field(default_factory=list)
    sequence_breaks: list[str] = field(default_factory=list)
    wrong_offset: list[tuple[Delivery, list[tuple[int, int]]]] = field(default_factory=list)
    reordered: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)
    fatal_errors: list[str] = field(default_factory=list)
    divergent: dict[int, list[str]] = field(default_factory=dict)
    group_misses: list[Delivery] = field(default_factory=list)
    commit_regressions: list[Resume] = field(default_factory=list)
    without_offset: int = 0
    group_checked: bool = False
    replicas_checked: bool = False

    @property
    def duplicate_copies(self) -> int:
        return sum(len(places) - 1 for _, places in self.duplicated)

    def ok(self) -> bool:
        """True when every counter of the table is zero."""
        return not (self.lost or self.duplicated or self.wrong_offset or self.reordered
                    or self.sequence_breaks or self.fatal_errors or self.divergent
                    or self.group_misses or self.commit_regressions)

    def counters(self) -> dict[str, int]:
        """The table's correctness columns, in order."""
        return {
            "acknowledged": self.acknowledged,
            "acknowledged without offset": self.without_offset,
            "read": self.read,
            "lost": len(self.lost),
            "duplicated": self.duplicate_copies,
            "re-sent by the client under a new producer epoch":
                sum(len(places) - 1 for _, places in self.resent),
            "reordered": len(self.reordered),
            "sequence breaks": len(self.sequence_breaks),
            "wrong offset": len(self.wrong_offset),
            "fatal producer errors": len(self.fatal_errors),
            "divergent partitions": len(self.divergent),
            "group misses": len(self.group_misses),
            "commit regressions": len(self.commit_regressions),
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


def writers_by_place(replicas: Iterable[ReplicaRead]) -> dict[Place, Writer]:
    """Who wrote the record at each (partition, offset): the in-sync replicas' batch headers
    first (below the high watermark they agree, or the divergence check says so), the others
    only where no in-sync replica holds the offset."""
    out: dict[Place, Writer] = {}
    for replica in sorted(replicas, key=lambda r: not r.in_isr):
        for offset, writer in replica.writers.items():
            out.setdefault((replica.partition, offset), writer)
    return out


def is_client_resend(places: Sequence[Place], writers: Mapping[Place, Writer]) -> bool:
    """True when the copies of one value lie in one partition and were written by one producer
    id under epochs that rise with the offset: the client sent it again after bumping its epoch
    (see the module's definitions); False when any copy's writer is unknown."""
    if len({partition for partition, _ in places}) != 1:
        return False
    found = [writers.get(place) for place in sorted(places)]
    known = [w for w in found if w is not None and w[0] >= 0]
    if len(known) != len(found) or len({w[0] for w in known}) != 1:
        return False
    return all(a[1] < b[1] for a, b in itertools.pairwise(known))


def find_sequence_breaks(read: Sequence[StoredRecord], writers: Mapping[Place, Writer]
                         ) -> list[str]:
    """One line per record whose sequence does not follow the one before it from the same
    (producer id, epoch) in its partition (offset order); records without a producer id or
    sequence, or whose writer no replica shows, are not checked."""
    last: dict[tuple[int, int, int], int] = {}
    out: list[str] = []
    for record in sorted(read, key=lambda r: (r.partition, r.offset)):
        writer = writers.get((record.partition, record.offset))
        if writer is None or writer[0] < 0 or writer[2] < 0:
            continue
        producer_id, epoch, sequence = writer
        key = (record.partition, producer_id, epoch)
        before = last.get(key)
        if before is not None and sequence != before + 1:
            out.append(f"partition {record.partition} offset {record.offset}: producer id "
                       f"{producer_id} epoch {epoch} sequence {sequence} after {before}")
        last[key] = sequence
    return out


def find_commit_regressions(resumes: Iterable[Resume]) -> list[Resume]:
    """The resumes below an acknowledged commit of their partition."""
    return [r for r in resumes if r.offset < r.acknowledged]


def check(deliveries: Sequence[Delivery], read: Sequence[StoredRecord],
          fatal_errors: Sequence[str] = (),
          replicas: Sequence[ReplicaRead] | None = None,
          high_watermarks: Mapping[int, int] | None = None,
          group_consumed: set[bytes] | None = None,
          group_resumes: Sequence[Resume] = ()) -> CheckResult:
    """Compare the delivery reports with the full read (see the module's definitions).

    ``replicas`` (with ``high_watermarks``) enables the divergence check and ``group_consumed``
    the consumer-group checks (with ``group_resumes``, the commit regressions); left ``None``
    they are reported as not checked.
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
    writers = writers_by_place(replicas or ())
    acked_at = {d.value: (d.partition, d.offset) for d in deliveries
                if d.offset is not None and d.offset >= 0}
    for value, n in copies.items():
        if n > 1:
            where = places[value]
            # A re-send is of a write whose first answer was not a success: an acknowledgement
            # naming an earlier copy makes the later one a duplicate of an acknowledged write.
            acked = acked_at.get(value)
            resent = is_client_resend(where, writers) and (acked is None
                                                            or acked == max(where))
            (result.resent if resent else result.duplicated).append((value, where))
    result.reordered = find_reorders(read)
    result.sequence_breaks = find_sequence_breaks(read, writers)
    if replicas is not None:
        result.replicas_checked = True
        result.divergent = find_divergence(read, replicas, high_watermarks or {})
    if group_consumed is not None:
        result.group_checked = True
        result.group_misses = [d for d in deliveries if d.value not in group_consumed]
        result.commit_regressions = find_commit_regressions(group_resumes)
    return result
