"""Injected time (Kafka's ``Time``): every roll, retention, flush and timeout decision reads it.

Production code takes a ``Clock``; tests pass a ``ManualClock`` and move it explicitly, so
rolling by ``segment.ms``, retention by ``retention.ms`` and session timeouts are deterministic.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in ms since the epoch (record timestamps, retention)."""

    def monotonic_ms(self) -> float:
        """Monotonic ms for measuring durations (flush intervals, timeouts)."""


class SystemClock:
    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic_ns() / 1_000_000


class ManualClock:
    """A clock that moves only when told to. Both readings advance together."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._mono = 0.0

    def milliseconds(self) -> int:
        return self._now

    def monotonic_ms(self) -> float:
        return self._mono

    def advance(self, ms: int) -> None:
        self._now += ms
        self._mono += ms
