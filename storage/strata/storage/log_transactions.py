"""Transactions over one log's segments: append origins, fetch isolation, the markers of an
append, producer-state replay with its completed transactions, and read_committed reads
(Kafka's ``AppendOrigin``, ``FetchIsolation``, ``UnifiedLog.collectAbortedTransactions`` and
``addAbortedTransactions``).

Owns no state: every function takes what a ``Log`` handed out (its immutable segment tuple and
the offsets read at the same moment) or the ``ProducerStateManager`` it updates.

Rules:

* only the coordinator (``AppendOrigin.COORDINATOR``) and replication write control batches;
  a client's control batch is refused by ``log_validator`` (INVALID_RECORD);
* an ABORT marker that completes a non-empty transaction is recorded in the ``.txnindex`` of
  the segment that holds the marker, with the last stable offset right after it;
* a read_committed read (``FetchIsolation.TXN_COMMITTED``) stops at the last stable offset and
  lists the aborted transactions that overlap [fetch offset, upper bound), where the upper bound
  is the end of the segment the data came from (or the read's bound, if lower): more entries
  than the data needs are harmless, clients skip what they do not meet. The search stops at the
  first index entry whose last stable offset reaches the upper bound (Kafka's rule).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container, Sequence
from enum import Enum, IntEnum

from strata.storage import record_batch as rb
from strata.storage.log_results import FetchDataInfo
from strata.storage.log_segment import LogSegment
from strata.storage.producer_state import CompletedTxn, ProducerStateManager
from strata.storage.records import EndTransactionMarker, read_end_transaction_marker
from strata.storage.transaction_index import AbortedTxn

OnCompletedTxn = Callable[[CompletedTxn], None]


class AppendOrigin(Enum):
    """Who appends (Kafka's ``AppendOrigin``): a produce request, the coordinator (markers),
    or a follower copying the leader."""

    CLIENT = "CLIENT"
    COORDINATOR = "COORDINATOR"
    REPLICATION = "REPLICATION"


class FetchIsolation(IntEnum):
    """Where a read stops (Kafka's ``FetchIsolation``): the log end (followers), the high
    watermark (read_uncommitted consumers), the last stable offset (read_committed). The
    values are the broker's ``replication.partition.FetchIsolation``'s, so either compares."""

    LOG_END = 0
    HIGH_WATERMARK = 1
    TXN_COMMITTED = 2


def markers_of(
    records: rb.Buffer, batches: Sequence[tuple[int, rb.BatchHeader]], first_offset: int | None,
) -> dict[int, EndTransactionMarker] | None:
    """The ABORT/COMMIT markers among ``batches`` (position, header) of ``records``, keyed by
    their base offset (``first_offset`` + record delta for a leader append whose batches still
    carry base offset 0; None: the headers' own offsets). None when there is no control batch,
    so the caller's common path does no work."""
    markers: dict[int, EndTransactionMarker] | None = None
    offset = first_offset
    for pos, header in batches:
        base = header.base_offset if offset is None else offset
        if header.attributes & rb.CONTROL_FLAG_MASK:
            marker = read_end_transaction_marker(records, pos)
            if marker is not None:
                if markers is None:
                    markers = {}
                markers[base] = marker
        if offset is not None:
            offset += header.last_offset_delta + 1
    return markers


def follower_producer_batches(
    records: rb.Buffer, headers: Sequence[tuple[int, rb.BatchHeader]],
) -> tuple[list[tuple[rb.BatchHeader, int, int]], dict[int, EndTransactionMarker] | None]:
    """A follower's append: ``(header, first, last)`` of each batch with a producer id, and
    the markers among them (None without a control batch)."""
    batches = [(h, h.base_offset, h.last_offset) for _, h in headers if h.producer_id >= 0]
    markers = None
    if any(h.attributes & rb.CONTROL_FLAG_MASK for h, _, _ in batches):
        markers = markers_of(records, headers, None)
    return batches, markers


def apply_producer_batches(
    psm: ProducerStateManager,
    producer_batches: Sequence[tuple[rb.BatchHeader, int, int]],
    markers: dict[int, EndTransactionMarker],
    on_completed: OnCompletedTxn | None,
) -> None:
    """Update the producer state with appended batches of which some are markers; each
    transaction a marker completes goes to ``on_completed``."""
    for h, first, last in producer_batches:
        if h.attributes & rb.CONTROL_FLAG_MASK:
            marker = markers.get(first)
            if marker is None:
                continue  # another control type (LEADER_CHANGE...): no producer state
            completed = psm.update_marker(h, first, marker)
            if completed is not None and on_completed is not None:
                on_completed(completed)
        else:
            psm.update(h, first, last, h.max_timestamp)


def aborted_entry(completed: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                      completed.last_stable_offset)


def index_aborted_txn(segments: Sequence[LogSegment], completed: CompletedTxn,
                      only: Container[int] | None = None) -> None:
    """Record an aborted ``completed`` in the ``.txnindex`` of the segment holding its marker
    (if that segment's base offset is in ``only``, when given: the loader's rebuild)."""
    if not completed.is_aborted:
        return
    bases = [s.base_offset for s in segments]
    idx = max(bisect.bisect_right(bases, completed.last_offset) - 1, 0)
    if only is None or bases[idx] in only:
        segments[idx].update_txn_index(aborted_entry(completed))


def check_markers(
    psm: ProducerStateManager, batches: Sequence[tuple[int, rb.BatchHeader]],
    markers: dict[int, EndTransactionMarker], first_offset: int,
) -> None:
    """A coordinator's append: check each marker's epochs (``ProducerStateManager.check_marker``)
    and each data batch's like a client's (duplicates are not expected from a coordinator)."""
    offset = first_offset
    for _, header in batches:
        marker = markers.get(offset) if header.attributes & rb.CONTROL_FLAG_MASK else None
        if marker is not None:
            psm.check_marker(header, marker)
        elif header.producer_id >= 0 and not header.attributes & rb.CONTROL_FLAG_MASK:
            psm.check(header, client=False)
        offset += header.last_offset_delta + 1


def replay_producer_state(
    psm: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    on_completed: OnCompletedTxn | None = None,
) -> None:
    """Replay the batches from the producer state's map end offset to ``log_end_offset``
    (after a load or a truncation reloaded it from a snapshot): headers only, plus the first
    record of each control batch (its marker)."""
    start = psm.map_end_offset
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
            continue
        for pos, h in seg.batches():
            if h.base_offset < start or not h.has_producer_id:
                continue
            if h.attributes & rb.CONTROL_FLAG_MASK:
                marker = read_end_transaction_marker(seg.log.read(pos, h.size))
                if marker is not None:
                    completed = psm.update_marker(h, h.base_offset, marker)
                    if completed is not None and on_completed is not None:
                        on_completed(completed)
            else:
                psm.update(h, h.base_offset, h.last_offset, h.max_timestamp)
    psm.update_map_end_offset(log_end_offset)


def collect_aborted_transactions(
    segments: Sequence[LogSegment], bases: Sequence[int], start_offset: int, upper_bound: int,
) -> list[AbortedTxn]:
    """Aborted transactions overlapping [``start_offset``, ``upper_bound``), from the segment
    holding ``start_offset`` on, until a search is complete (module docstring). Later segments
    count even past ``upper_bound``: a transaction of the range may be aborted much later."""
    out: list[AbortedTxn] = []
    idx = max(bisect.bisect_right(bases, start_offset) - 1, 0)
    for seg in segments[idx:]:
        found = seg.collect_aborted_txns(start_offset, upper_bound)
        out.extend(found.aborted)
        if found.is_complete:
            break
    return out


def read_committed(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    start_offset: int,
    max_bytes: int,
    bound: int,
    end: int,
    min_one_message: bool,
) -> FetchDataInfo:
    """``log_read.read_segments`` for a read_committed consumer: ``bound`` is already at most
    the last stable offset; the result also lists the aborted transactions of its range."""
    if start_offset >= bound:
        return FetchDataInfo(start_offset, (), ())
    idx = max(bisect.bisect_right(bases, start_offset) - 1, 0)
    while idx < len(segments):
        segment = segments[idx]
        last = idx + 1 >= len(segments) or bound < bases[idx + 1]
        max_position = None
        if last:
            found = segment.translate_offset(bound) if bound < end else None
            max_position = found[0] if found is not None else segment.size
        fslice = segment.read(start_offset, max_bytes, max_position, min_one_message)
        if fslice is not None and fslice.length > 0:
            upper = bound if last else min(bound, bases[idx + 1])
            aborted = collect_aborted_transactions(segments, bases, start_offset, upper)
            return FetchDataInfo(start_offset, (fslice,),
                                 tuple((t.producer_id, t.first_offset) for t in aborted))
        if last:
            break
        idx += 1
    return FetchDataInfo(start_offset, (), ())
