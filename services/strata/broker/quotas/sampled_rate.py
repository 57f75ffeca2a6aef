"""A rate over time windows, measured as Kafka's ``Rate`` over a ``SampledStat`` measures it.

Owns the arithmetic of quota measurement: values are added to the current sample; a sample is
complete after ``window_ms``; at most ``samples`` samples are kept (the oldest is reused);
samples older than ``samples * window_ms`` count as empty. The rate is the sum of the samples
over the elapsed window, which is never taken as shorter than ``samples - 1`` full windows (so
a burst right after a quiet spell is not measured over a few milliseconds) nor under 1 ms.

``throttle_time_ms`` is KIP-219's: how long a client that has pushed the rate to ``value``
above ``bound`` must stay away for the rate to fall back to the bound,
``(value - bound) / bound * window``.

Pure: the caller passes ``now_ms`` (its injected clock) to every call; not thread-safe (the
broker's event loop is its only user).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


class SampledRate:
    """Units per second over the last ``samples`` windows of ``window_ms``."""

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a sampled rate needs at least 1 sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples = [_Sample(now_ms)]
        self._current = 0
        self.last_record_ms = now_ms

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` (negative to take back a value recorded earlier) at ``now_ms``."""
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value
        self.last_record_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for index, sample in enumerate(self._samples):
            if now_ms - sample.start_ms >= expire_age:
                self._samples[index] = _Sample(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over at ``now_ms``."""
        self._purge(now_ms)
        elapsed = now_ms - min(sample.start_ms for sample in self._samples)
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate at ``now_ms``, in units per second."""
        window_ms = self.window_size_ms(now_ms)
        return sum(sample.value for sample in self._samples) * 1000.0 / window_ms


def throttle_time_ms(value: float, bound: float, window_ms: int) -> int:
    """How long to hold back a client measured at ``value`` against quota ``bound`` (0 when
    within it)."""
    if value <= bound:
        return 0
    if bound <= 0:
        return window_ms
    return round((value - bound) / bound * window_ms)
