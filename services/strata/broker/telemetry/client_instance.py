"""One client instance of KIP-714: its subscription and where it is in the push cycle.

A ``ClientInstance`` is evaluated against the subscriptions in force when it is created (or
re-created after they change): the union of the matching subscriptions' metrics (``*`` alone
when one subscribes to all), the smallest of their intervals (300000 ms when none matches),
and the subscription id, Kafka's CRC32C of the metrics and interval XOR the instance id's hash,
so it changes exactly when the matching set's contents do.

Timing rules (Kafka's ``ClientMetricsInstance``), all in milliseconds of the injected clock:

* a GetTelemetrySubscriptions is accepted when a push interval has passed since the later of
  the last accepted get and push (else THROTTLING_QUOTA_EXCEEDED, unless the last error was
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE, which the client recovers from
  with a new get);
* a PushTelemetry is accepted right after an accepted get (clients jitter the first push),
  else once a push interval has passed since the last accepted push;
* after a push with ``terminating`` set, every further push is INVALID_REQUEST.

Mutated only on the event loop, by the manager that owns the instance. Pure: no I/O.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import crc32c

from strata.broker.telemetry.client_metrics_config import (
    ALL_SUBSCRIBED_METRICS,
    INTERVAL_MS_DEFAULT,
    ClientInstanceMetadata,
    Subscription,
)


def java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()`` as a signed 32-bit int."""
    msb, lsb = value.int >> 64, value.int & (2**64 - 1)
    folded = msb ^ lsb
    return _int32((folded >> 32) ^ folded)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """CRC32C of the metrics (sorted, as ``[a, b]``) and the interval, XOR the id's hash."""
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    return _int32(crc32c.crc32c(text.encode()) ^ java_uuid_hash(instance_id))


def evaluate(subscriptions: list[Subscription],
             metadata: ClientInstanceMetadata) -> tuple[tuple[str, ...], int]:
    """(requested metrics, push interval) of a client under ``subscriptions``."""
    interval = INTERVAL_MS_DEFAULT
    metrics: set[str] = set()
    everything = False
    for sub in subscriptions:
        if metadata.matches(sub.match):
            everything = everything or sub.all_metrics
            metrics.update(sub.metrics)
            interval = min(interval, sub.interval_ms)
    if everything:
        return (ALL_SUBSCRIBED_METRICS,), interval
    return tuple(sorted(metrics)), interval


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    metadata: ClientInstanceMetadata
    metrics: tuple[str, ...]
    push_interval_ms: int
    subscription_id: int
    subscriptions_key: object  # the subscription set this was evaluated against
    last_get_ms: int = field(default=-(2**62))
    last_push_ms: int = field(default=-(2**62))
    terminating: bool = False
    last_error: str = "NONE"
    last_seen_ms: int = 0

    @classmethod
    def create(cls, instance_id: uuid.UUID, metadata: ClientInstanceMetadata,
               subscriptions: list[Subscription], subscriptions_key: object) -> ClientInstance:
        metrics, interval = evaluate(subscriptions, metadata)
        return cls(instance_id, metadata, metrics, interval,
                   subscription_id(metrics, interval, instance_id), subscriptions_key)

    def accept_get(self, now_ms: int) -> bool:
        """Record a GetTelemetrySubscriptions if a push interval has passed (see above)."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def accept_push(self, now_ms: int) -> bool:
        """Record a PushTelemetry if it comes right after a get or an interval after the last
        push."""
        accepted = (self.last_get_ms > self.last_push_ms
                    or now_ms - self.last_push_ms >= self.push_interval_ms)
        if accepted:
            self.last_push_ms = now_ms
        return accepted
