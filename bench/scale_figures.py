"""The pure arithmetic of ``bench/scale.py``: percentiles, a broker's resident memory from
``/proc/PID/status``, which partitions a Metadata answer shows as not yet ready, and the issue's
scale targets judged against measured figures. No I/O, no clock: every input is passed in.

A partition is *ready* when it has a leader (not -1) and its ISR holds every replica (a full
ISR, the replication factor asked for). Percentiles are nearest-rank (the smallest value with at
least q% of the values at or below it), so p99 of 20 samples is the largest: with few samples the
tail is reported, never interpolated away.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GIB = 1024 ** 3


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (not empty)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} outside (0, 100]")
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)), 1) - 1]


def rss_bytes(status: str) -> int:
    """``VmRSS`` of a ``/proc/PID/status`` text, in bytes (the kernel prints kB = KiB)."""
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            number, _, unit = value.strip().partition(" ")
            if unit.strip() != "kB":
                raise ValueError(f"VmRSS in unexpected unit: {line!r}")
            return int(number) * 1024
    raise ValueError("no VmRSS line (a kernel thread, or a process that has exited)")


@dataclass(frozen=True)
class PartitionState:
    """One partition as a Metadata response shows it."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int = 0


def unready(partitions: Iterable[PartitionState], replication_factor: int) -> list[int]:
    """The partitions (ids, ascending) without a leader, with an error, or whose ISR is short
    of ``replication_factor`` replicas or holds a broker outside the replica set."""
    out = []
    for p in partitions:
        full = len(set(p.isr)) >= replication_factor and set(p.isr) <= set(p.replicas)
        if p.error != 0 or p.leader < 0 or not full:
            out.append(p.partition)
    return sorted(out)


def sample(count: int, size: int) -> list[int]:
    """``size`` partition ids spread evenly over ``0 .. count - 1`` (all of them if fewer)."""
    if size >= count:
        return list(range(count))
    return sorted({i * count // size for i in range(size)})


@dataclass(frozen=True)
class Target:
    """One of issue 23's scale targets beside what was measured; ``None``: not measured."""

    what: str
    measured: float | None
    limit: float
    unit: str

    @property
    def met(self) -> bool | None:
        return None if self.measured is None else self.measured <= self.limit

    def line(self) -> str:
        if self.measured is None:
            return f"{self.what}: not measured (target <= {self.limit:g} {self.unit})"
        verdict = "met" if self.met else "NOT MET"
        return (f"{self.what}: {self.measured:,.2f} {self.unit} (target <= {self.limit:g} "
                f"{self.unit}): {verdict}")


def idle_cost(alone_records_per_s: float, with_idle_records_per_s: float) -> float:
    """The throughput lost to idle connections, in percent of the producers-alone rate (a
    negative figure: the run with idle connections was faster, i.e. noise)."""
    if alone_records_per_s <= 0:
        raise ValueError("the producers-alone rate must be positive")
    return (1 - with_idle_records_per_s / alone_records_per_s) * 100


def targets(ready_s: float | None, recovery_s: float | None, rss_max_bytes: int | None,
            idle_cost_percent: float | None) -> list[Target]:
    """Issue 23's scale targets: READY <= 30 s, recovery after kill -9 <= 60 s, <= 1 GiB
    resident per broker (the largest broker's), idle connections cost <= 10% of throughput."""
    return [
        Target("time to READY", ready_s, 30, "s"),
        Target("recovery after kill -9 of every broker", recovery_s, 60, "s"),
        Target("resident memory of the largest broker",
               None if rss_max_bytes is None else rss_max_bytes / GIB, 1, "GiB"),
        Target("throughput lost to the idle connections", idle_cost_percent, 10, "%"),
    ]
