"""Retention decisions: which head segments of a log go. Pure: no files, no clock reads.

Kafka's rules (``UnifiedLog.deleteOldSegments``), each a predicate over ``(segment, next)``:

* ``retention.ms`` — a segment whose largest timestamp is older than ``now - retention.ms``;
* ``retention.bytes`` — oldest segments while the log stays at or above ``retention.bytes``
  without them;
* log start offset — a segment whose successor starts at or below the log start offset
  (DeleteRecords, or a follower told so by its leader).

``deletable_prefix`` applies one predicate to the longest prefix of segments, and never lets a
segment go unless every offset in it is below the high watermark (a consumer could still need
it otherwise). Segments emptied by compaction are passed over, and go only together with a
later segment that really expires (so compaction alone never moves the log start offset). The
active (last) segment counts as wholly below the HW only when HW = LEO; the ``Log`` rolls
before deleting it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class RetainedSegment(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


S = RetainedSegment
T = TypeVar("T", bound=RetainedSegment)
Predicate = Callable[[S, S | None], bool]


def deletable_prefix(
    segments: Sequence[T], high_watermark: int, log_end_offset: int,
    predicate: Callable[[T, T | None], bool],
) -> int:
    """How many head segments may be deleted under ``predicate``."""
    count, tentative = 0, 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if upper > high_watermark:
            break
        if seg.size == 0 and nxt is not None:
            tentative += 1
            continue
        if seg.size == 0 or not predicate(seg, nxt):
            break
        count += tentative + 1
        tentative = 0
    return count


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate:
    return lambda seg, _: now_ms - seg.largest_timestamp > retention_ms


def retention_bytes_breached(log_size: int, retention_bytes: int) -> Predicate:
    """Stateful: each segment it accepts counts against the excess (call in order, once)."""
    excess = log_size - retention_bytes

    def breached(seg: S, _: S | None) -> bool:
        nonlocal excess
        if excess - seg.size >= 0:
            excess -= seg.size
            return True
        return False

    return breached


def below_log_start(log_start_offset: int) -> Predicate:
    return lambda _, nxt: nxt is not None and nxt.base_offset <= log_start_offset
