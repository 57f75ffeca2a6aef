"""The ``controller_mutation_rate`` quota (KIP-599): partition mutations per second, as Kafka's
``ControllerMutationQuotaManager`` counts them with a token bucket.

Owns, per metric-tag pair (``ClientQuotas.resolve``), a ``TokenBucket``: it holds at most the
quota times the whole quota window (``quota.window.num`` x ``quota.window.size.seconds``) of
tokens, refills at the quota per second, and each partition created or deleted takes one. A
mutation is refused while the bucket is below zero (so one request may overdraw it, as in
Kafka: a request is only refused once the quota is already exceeded); the throttle time is
how long the bucket needs to climb back to zero.

Pure: time comes in as ``now_ms``; the caller decides whether to refuse (Kafka refuses with
THROTTLING_QUOTA_EXCEEDED from CreateTopics v6, CreatePartitions v3 and DeleteTopics v5, and
only throttles older versions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import CONTROLLER_MUTATION_RATE, ClientQuotas


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens per second, at most ``burst``; starts full."""

    rate: float
    burst: float
    tokens: float
    last_ms: int

    def _refill(self, now_ms: int) -> None:
        elapsed = max(0, now_ms - self.last_ms) / 1000.0
        self.tokens = min(self.burst, self.tokens + self.rate * elapsed)
        self.last_ms = now_ms

    def exceeded(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self.tokens < 0

    def take(self, count: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= count

    def throttle_time_ms(self, now_ms: int) -> int:
        self._refill(now_ms)
        if self.tokens >= 0 or self.rate <= 0:
            return 0
        return math.ceil(-self.tokens / self.rate * 1000)


@dataclass
class ControllerMutationQuotaManager:
    """Token buckets of ``controller_mutation_rate`` per metric-tag pair."""

    window: QuotaWindow = field(default_factory=QuotaWindow)
    quotas: ClientQuotas = field(default_factory=ClientQuotas)
    _buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict)

    def update_quotas(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas
        self._buckets.clear()  # a new rate starts a new (full) bucket

    def _bucket(self, user: str, client_id: str, now_ms: int) -> TokenBucket | None:
        if not self.quotas.has_any(CONTROLLER_MUTATION_RATE):
            return None
        resolved = self.quotas.resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if resolved.limit is None:
            return None
        tags = (resolved.user_tag, resolved.client_id_tag)
        bucket = self._buckets.get(tags)
        if bucket is None:
            burst = resolved.limit * self.window.samples * self.window.size_ms / 1000.0
            bucket = self._buckets[tags] = TokenBucket(resolved.limit, burst, burst, now_ms)
        return bucket

    def admit(self, user: str, client_id: str, partitions: int, now_ms: int,
              strict: bool) -> bool:
        """Record ``partitions`` mutations unless ``strict`` and the quota is exceeded
        (then False: the mutation is refused and nothing is recorded)."""
        bucket = self._bucket(user, client_id, now_ms)
        if bucket is None:
            return True
        if strict and bucket.exceeded(now_ms):
            return False
        bucket.take(partitions, now_ms)
        return True

    def throttle_time_ms(self, user: str, client_id: str, now_ms: int) -> int:
        bucket = self._bucket(user, client_id, now_ms)
        return 0 if bucket is None else bucket.throttle_time_ms(now_ms)
