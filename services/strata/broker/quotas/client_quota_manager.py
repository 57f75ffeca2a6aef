"""Enforcement of one kind of client quota: measure, compare, and say how long to throttle.

Owns, per quota key (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``),
what Kafka's ``ClientQuotaManager`` / ``ClientRequestQuotaManager`` keep: one ``SampledRate``
per metric-tag pair (user, client-id) as ``ClientQuotas.resolve`` names it — so clients that
share a quota share a sensor — plus the throttle time each pair was last given and in total.

- ``record_and_get_throttle_time_ms``: add a request's value (produce: the request's bytes;
  fetch: the response's bytes; request: the handler's time as a percentage of one thread) and
  return 0, or the KIP-219 throttle time when the rate is now above the quota, capped at the
  whole quota window (``quota.window.num`` x ``quota.window.size.seconds``). The value stays
  recorded either way, as in Kafka, so a client that keeps pushing stays throttled. The
  request quota bounds its throttle at one ``quota.window.size.seconds`` instead
  (``max_throttle_ms``; Kafka's ``ClientRequestQuotaManager.throttleTime``).
- ``record_no_throttle``: add a value that throttles nobody now but counts against the next
  request (Kafka records a request's network-thread time so).
- ``record_exempt``: the time of requests exempt from the request quota (inter-broker
  requests, a follower's Fetch, SASL authentication), in one sensor for all clients (Kafka's
  ``exempt-request-time``); ``exempt_rate`` reads it.
- ``unrecord``: take a recorded value back (Kafka does so for a fetch answered empty because
  it is throttled).
- ``max_value_in_window``: the most a client may take in one quota window (Kafka caps a
  fetch's ``max_bytes`` with it, so one fetch cannot overshoot the quota by a whole log).
- sensors idle for an hour are dropped (Kafka's inactive-sensor expiry).

Pure: the quotas come from the caller's ``ClientQuotas`` (``update_quotas`` swaps them), time
from ``now_ms`` arguments. Without any quota for the key nothing is measured at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from strata.broker.quotas.client_quotas import ClientQuotas
from strata.broker.quotas.sampled_rate import SampledRate, throttle_time_ms

INACTIVE_SENSOR_EXPIRY_MS: Final = 3_600_000
NANOS_TO_PERCENT_PER_SECOND: Final = 100.0 / 1e9


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka: 11 x 1 s)."""

    samples: int = 11
    size_ms: int = 1000

    @property
    def max_throttle_ms(self) -> int:
        return self.samples * self.size_ms


@dataclass(slots=True)
class ThrottleStats:
    """Throttle times given to one metric-tag pair (for ``strata_quota_*`` metrics)."""

    last_ms: int = 0
    total_ms: int = 0
    count: int = 0


@dataclass
class ClientQuotaManager:
    """Rates and throttling for one quota key."""

    key: str
    window: QuotaWindow = field(default_factory=QuotaWindow)
    quotas: ClientQuotas = field(default_factory=ClientQuotas)
    max_throttle_ms: int | None = None  # None: the whole quota window
    _sensors: dict[tuple[str, str], SampledRate] = field(default_factory=dict)
    throttles: dict[tuple[str, str], ThrottleStats] = field(default_factory=dict)
    _exempt: SampledRate | None = None
    _enabled: bool = False

    def __post_init__(self) -> None:
        self._enabled = self.quotas.has_any(self.key)

    def update_quotas(self, quotas: ClientQuotas) -> None:
        """New quota configuration: sensors keep their history, limits apply from now."""
        self.quotas = quotas
        self._enabled = quotas.has_any(self.key)

    @property
    def enabled(self) -> bool:
        """Whether any entity has a quota of this key (asked on every request: cached)."""
        return self._enabled

    def _sensor(self, tags: tuple[str, str], now_ms: int) -> SampledRate:
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = SampledRate(self.window.samples, self.window.size_ms,
                                                       now_ms)
        return sensor

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        now_ms: int) -> int:
        """Record ``value`` for the client; the time it must be throttled for (0: none)."""
        if not self.enabled:
            return 0
        resolution = self.quotas.resolve(self.key, user, client_id)
        if resolution.limit is None:
            return 0
        tags = (resolution.user_tag, resolution.client_id_tag)
        sensor = self._sensor(tags, now_ms)
        sensor.record(value, now_ms)
        rate = sensor.measure(now_ms)
        bound = (self.window.max_throttle_ms if self.max_throttle_ms is None
                 else self.max_throttle_ms)
        throttle = min(throttle_time_ms(rate, resolution.limit, sensor.window_size_ms(now_ms)),
                       bound)
        if throttle > 0:
            stats = self.throttles.setdefault(tags, ThrottleStats())
            stats.last_ms = throttle
            stats.total_ms += throttle
            stats.count += 1
        return throttle

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Record ``value`` for the client without throttling it now."""
        if not self.enabled:
            return
        resolution = self.quotas.resolve(self.key, user, client_id)
        if resolution.limit is not None:
            self._sensor((resolution.user_tag, resolution.client_id_tag), now_ms).record(
                value, now_ms)

    def record_exempt(self, value: float, now_ms: int) -> None:
        """Record ``value`` of a request exempt from the quota (measured while any quota of
        this key is set, as Kafka's exempt sensor)."""
        if not self.enabled:
            return
        if self._exempt is None:
            self._exempt = SampledRate(self.window.samples, self.window.size_ms, now_ms)
        self._exempt.record(value, now_ms)

    def exempt_rate(self, now_ms: int) -> float | None:
        """The exempt requests' rate now; None when nothing exempt was ever measured."""
        return None if self._exempt is None else self._exempt.measure(now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back ``value`` recorded for the client (its response carried none of it)."""
        if not self.enabled:
            return
        resolution = self.quotas.resolve(self.key, user, client_id)
        sensor = self._sensors.get((resolution.user_tag, resolution.client_id_tag))
        if sensor is not None:
            sensor.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most the client may take in one quota window; None when it has no quota."""
        if not self.enabled:
            return None
        limit = self.quotas.resolve(self.key, user, client_id).limit
        if limit is None:
            return None
        return limit * (self.window.samples - 1) * self.window.size_ms / 1000.0

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        """The client's measured rate now (0 when nothing is measured for it)."""
        resolution = self.quotas.resolve(self.key, user, client_id)
        sensor = self._sensors.get((resolution.user_tag, resolution.client_id_tag))
        return 0.0 if sensor is None else sensor.measure(now_ms)

    def measured(self, now_ms: int) -> dict[tuple[str, str], float]:
        """Every measured (user, client-id) tag pair and its rate now (for metrics)."""
        return {tags: sensor.measure(now_ms) for tags, sensor in self._sensors.items()}

    def expire_inactive(self, now_ms: int) -> int:
        """Drop sensors without a record for an hour; how many were dropped."""
        idle = [tags for tags, sensor in self._sensors.items()
                if now_ms - sensor.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._sensors[tags]
            self.throttles.pop(tags, None)
        return len(idle)
