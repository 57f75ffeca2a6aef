"""Time series the console draws: a small in-memory ring of points per series, rates from counters.

Pure: no I/O and no clock of its own — every observation carries its time (seconds, from the
sampler's injected clock), so the rules below are tested without waiting.

* ``Ring``: the last ``capacity`` points ``(t, value)`` of one series, oldest first; appending
  to a full ring drops the oldest point. Times only move forward: a point not later than the
  last one replaces it (two samples in the same instant keep the newer);
* ``SeriesStore``: rings by key (``"cluster:bytes_in"``, ``"group:billing:lag"``...), at most
  ``max_series`` of them (the least recently written is dropped first, so groups and topics
  that come and go cannot grow it without bound);

  - ``gauge(key, t, value)``: a value as it is (disk use, a group's lag);
  - ``counter(key, t, total)``: a monotonically increasing total (Prometheus' ``_total``
    series). Its ring holds the per-second *rate* between consecutive totals; the first total
    seen only primes the series (no point yet), unless the counter is known to have been 0
    then (``counter_from_zero``: its series did not exist at the previous sample). A total
    below the previous one is a counter reset (the broker restarted), counted as
    Prometheus' ``rate`` counts it: the increase is the new total itself;
  - ``points(key)`` / ``latest(key)``: what is drawn and shown.

Touched only from the event loop (no lock).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Final

DEFAULT_CAPACITY: Final = 360  # 30 minutes of 5-second samples
DEFAULT_MAX_SERIES: Final = 5_000

Point = tuple[float, float]


class Ring:
    """The last ``capacity`` points of one series, oldest first."""

    __slots__ = ("_points",)

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a ring holds at least one point")
        self._points: deque[Point] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._points)

    def append(self, t: float, value: float) -> None:
        if self._points and t <= self._points[-1][0]:
            self._points[-1] = (self._points[-1][0], value)
            return
        self._points.append((t, value))

    def points(self) -> list[Point]:
        return list(self._points)

    def latest(self) -> Point | None:
        return self._points[-1] if self._points else None


@dataclass(slots=True)
class _Counter:
    t: float
    total: float


@dataclass(slots=True)
class SeriesStore:
    """Rings by key; counters kept as rates (see the module's docstring)."""

    capacity: int = DEFAULT_CAPACITY
    max_series: int = DEFAULT_MAX_SERIES
    _rings: OrderedDict[str, Ring] = field(default_factory=OrderedDict)
    _counters: dict[str, _Counter] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._rings)

    def keys(self) -> list[str]:
        return list(self._rings)

    def _ring(self, key: str) -> Ring:
        ring = self._rings.get(key)
        if ring is None:
            ring = self._rings[key] = Ring(self.capacity)
            while len(self._rings) > self.max_series:
                dropped, _ = self._rings.popitem(last=False)
                self._counters.pop(dropped, None)
        else:
            self._rings.move_to_end(key)
        return ring

    def gauge(self, key: str, t: float, value: float) -> None:
        self._ring(key).append(t, value)

    def has_counter(self, key: str) -> bool:
        return key in self._counters

    def counter_from_zero(self, key: str, t: float) -> None:
        """A counter known to be 0 at ``t`` (its series did not exist yet): primed there, with
        a rate of 0 up to ``t``."""
        self._counters[key] = _Counter(t, 0.0)
        self._ring(key).append(t, 0.0)

    def counter(self, key: str, t: float, total: float) -> float | None:
        """Record a counter's ``total`` at ``t``; the rate it gives (None for the first)."""
        previous = self._counters.get(key)
        self._counters[key] = _Counter(t, total)
        if previous is None or t <= previous.t:
            self._ring(key)  # the series exists (and keeps its place) from its first total
            return None
        increase = total - previous.total if total >= previous.total else total
        rate = increase / (t - previous.t)
        self._ring(key).append(t, rate)
        return rate

    def points(self, key: str) -> list[Point]:
        ring = self._rings.get(key)
        return ring.points() if ring is not None else []

    def latest(self, key: str) -> float | None:
        ring = self._rings.get(key)
        point = ring.latest() if ring is not None else None
        return point[1] if point is not None else None
