"""The pure parts of ``bench/rebalance.py``: when a group is stable, how long members paused,
and the printed lines (no broker, no client; unit-tested in ``tests/unit/bench``).

* ``is_stable``: every partition held by exactly one member, every member within one
  partition of the others (``floor(P/N)`` or ``ceil(P/N)``) — what both the classic assignors
  (range, cooperative-sticky) and the broker's ``uniform`` reach with one topic;
* ``consumed_again``: issue 20's figure, from the event until every partition has been
  processed again by the member holding it at the end, in a batch it got after it was given
  the partition (for a member that kept a partition: after the event);
* ``longest_pause``: the longest stretch a member went without processing a record inside a
  window (its batch timestamps, plus the window's edges), i.e. how long a rebalance stopped
  it; ``median`` / ``nearest-rank p`` of those over the members;
* ``figure_line``: one Kafka perf-test-like line per measurement.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TP = tuple[str, int]


def is_stable(assignments: Mapping[str, Iterable[TP]], partitions: Iterable[TP]) -> bool:
    """Every partition in exactly one member's assignment, loads within one of each other."""
    wanted = set(partitions)
    members = {m: list(a) for m, a in assignments.items()}
    if not members:
        return False
    held: list[TP] = [tp for owned in members.values() for tp in owned]
    if len(held) != len(set(held)) or set(held) != wanted:
        return False
    low = len(wanted) // len(members)
    high = math.ceil(len(wanted) / len(members))
    return all(low <= len(owned) <= high for owned in members.values())


def consumed_again(owners: Mapping[TP, str], acquired: Mapping[tuple[str, TP], float],
                   batches: Mapping[str, Sequence[tuple[float, Iterable[TP]]]],
                   start: float) -> float | None:
    """Seconds from ``start`` until each partition of ``owners`` (partition -> its final
    owner) was in one of that owner's ``batches`` (time, partitions) at or after both
    ``start`` and the time the owner was given it (``acquired[(owner, partition)]``, from its
    assign callback; absent: before ``start``). None when one partition never was."""
    latest = start
    for tp, owner in owners.items():
        since = max(start, acquired.get((owner, tp), start))
        first = min((t for t, tps in batches.get(owner, ()) if t >= since and tp in tps),
                    default=None)
        if first is None:
            return None
        latest = max(latest, first)
    return latest - start


def longest_pause(batch_times: Sequence[float], start: float, end: float) -> float:
    """The longest gap between consecutive processed batches inside ``[start, end]`` (the
    window's edges count as batches), in the times' unit."""
    inside = sorted(t for t in batch_times if start <= t <= end)
    points = [start, *inside, end]
    return max((b - a for a, b in itertools.pairwise(points)), default=0.0)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Measurement:
    protocol: str
    """``classic-eager``, ``classic-cooperative`` or ``consumer``."""
    event: str
    """``join``, ``leave`` or ``rolling-restart``."""
    members: int
    partitions: int
    stable_s: float | None
    """From the event to a stable assignment (None: not within the timeout)."""
    pauses_s: tuple[float, ...]
    """Per member present throughout: its longest processing pause in the window."""
    consumed_s: float | None = None
    """From the event until every partition was consumed again (``consumed_again``)."""


def figure_line(m: Measurement) -> str:
    """``protocol=consumer event=join members=10 partitions=100 stable=0.84 s
    pause.max=0.31 s pause.p50=0.12 s`` (Kafka perf-test style: key=value, one line)."""
    stable = "NOT STABLE" if m.stable_s is None else f"{m.stable_s:.2f} s"
    consumed = "-" if m.consumed_s is None else f"{m.consumed_s:.2f} s"
    return (f"protocol={m.protocol} event={m.event} members={m.members} "
            f"partitions={m.partitions} stable={stable} consumed={consumed} "
            f"pause.max={max(m.pauses_s, default=0.0):.2f} s "
            f"pause.p50={percentile(m.pauses_s, 50):.2f} s")


def speedup(base: Measurement | None, other: Measurement | None,
            figure: str = "stable_s") -> str:
    """``3.1x`` faster than ``base`` by ``figure`` (``stable_s`` or ``consumed_s``; ``-`` when
    either is missing)."""
    if base is None or other is None:
        return "-"
    before, after = getattr(base, figure), getattr(other, figure)
    if before is None or after is None or after <= 0:
        return "-"
    return f"{before / after:.1f}x"
