"""``ClientMetricsManager``: Kafka's answers to GetTelemetrySubscriptions and PushTelemetry.

Owns the client instances this broker knows (an LRU of at most ``MAX_CLIENT_INSTANCES``, each
forgotten after ``max(60 s, 3 push intervals)`` without a request, as Kafka's cache) and the
client software each connection announced in ApiVersions v3 (``note_client_software``, what
``client_software_name`` / ``client_software_version`` selectors match).

GetTelemetrySubscriptions: a zero (or null) client instance id gets a new random one; the
instance is (re-)evaluated against the subscriptions when it is new or they changed since
(``ClientInstance.create``), then the timing rule of ``client_instance`` applies; the answer
carries the subscription id, the requested metrics, the push interval, ``telemetry.max.bytes``,
the accepted compression types (ZSTD, LZ4, GZIP, SNAPPY: Kafka's order, its preference) and
delta temporality.

PushTelemetry, checked in Kafka's order: a null or reserved (zero) instance id is
INVALID_REQUEST; a push after a terminating one is INVALID_REQUEST; too early (and not
terminating) is THROTTLING_QUOTA_EXCEEDED; another subscription id than the instance's is
UNKNOWN_SUBSCRIPTION_ID (the client then asks again); an unknown codec is
UNSUPPORTED_COMPRESSION_TYPE; a payload over ``telemetry.max.bytes`` is TELEMETRY_TOO_LARGE.
A payload that passes is decoded (``otlp``; INVALID_RECORD, or TELEMETRY_TOO_LARGE when it is
too large decompressed) and handed to the exporter (``client_metrics_collector``).

Subscriptions are read on each request through ``subscriptions`` (the stored
``client-metrics`` resources); their contents are the version Kafka keeps as a counter. Time is
the injected clock's. Runs on the event loop only.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from strata.broker.telemetry.client_instance import ClientInstance
from strata.broker.telemetry.client_metrics_config import (
    ClientInstanceMetadata,
    Subscription,
    name_of,
    subscriptions_of,
)
from strata.broker.telemetry.otlp import (
    InvalidTelemetry,
    Sample,
    TelemetryTooLarge,
    decode_metrics,
)
from strata.storage.clock import Clock
from strata.storage.compression import CompressionType

MAX_CLIENT_INSTANCES: Final = 16384
"""Kafka's cache size of client instances per broker (16k active connections)."""
INSTANCE_EXPIRY_MS: Final = 60_000
TELEMETRY_MAX_BYTES_DEFAULT: Final = 1024 * 1024
ACCEPTED_COMPRESSION_TYPES: Final = (
    CompressionType.ZSTD, CompressionType.LZ4, CompressionType.GZIP, CompressionType.SNAPPY)
_RESERVED_IDS: Final = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED


class MetricsExporter(Protocol):
    def export(self, instance_id: uuid.UUID, push_interval_ms: int, samples: list[Sample],
               now_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class SubscriptionsAnswer:
    error: str  # Kafka's error name, "NONE" when answered
    message: str | None
    client_instance_id: uuid.UUID
    subscription_id: int = 0
    push_interval_ms: int = 0
    requested_metrics: tuple[str, ...] = ()
    telemetry_max_bytes: int = 0
    accepted_compression_types: tuple[int, ...] = ()
    delta_temporality: bool = True


@dataclass(frozen=True, slots=True)
class PushAnswer:
    error: str
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """Who sent a request: what ``match`` selectors other than the instance id test."""

    client_id: str | None
    host: str
    port: int


class ClientMetricsManager:
    def __init__(self, clock: Clock,
                 stored: Callable[[], Mapping[str, Mapping[str, str]]], *,
                 telemetry_max_bytes: int = TELEMETRY_MAX_BYTES_DEFAULT,
                 exporter: MetricsExporter | None = None,
                 max_instances: int = MAX_CLIENT_INSTANCES) -> None:
        self.clock = clock
        self.stored = stored
        self.telemetry_max_bytes = telemetry_max_bytes
        self.exporter = exporter
        self.max_instances = max_instances
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._software: OrderedDict[tuple[str, int], tuple[str, str]] = OrderedDict()
        self._parsed: tuple[object, list[Subscription]] = ((), [])

    # ------------------------------------------------------------------ inputs
    def note_client_software(self, host: str, port: int, name: str, version: str) -> None:
        """What a connection's ApiVersions v3 said (bounded like the instance cache)."""
        key = (host, port)
        self._software[key] = (name, version)
        self._software.move_to_end(key)
        while len(self._software) > self.max_instances:
            self._software.popitem(last=False)

    def subscriptions(self) -> tuple[object, list[Subscription]]:
        """(version key, subscriptions): the key changes exactly when a subscription does."""
        key = tuple(sorted((scope, tuple(sorted(configs.items())))
                           for scope, configs in self.stored().items()
                           if name_of(scope) is not None))
        if key != self._parsed[0]:
            self._parsed = (key, subscriptions_of({scope: dict(configs)
                                                   for scope, configs in key}))
        return self._parsed

    @property
    def instances(self) -> Mapping[uuid.UUID, ClientInstance]:
        return self._instances

    # ------------------------------------------------------------------ requests
    def get_subscriptions(self, requested_id: uuid.UUID | None,
                          client: ClientConnection) -> SubscriptionsAnswer:
        now = self.clock.milliseconds()
        instance_id = requested_id
        if instance_id is None or instance_id == uuid.UUID(int=0):
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, client, now)
        if not instance.accept_get(now) and instance.last_error not in (
                "UNKNOWN_SUBSCRIPTION_ID", "UNSUPPORTED_COMPRESSION_TYPE"):
            return SubscriptionsAnswer(
                "THROTTLING_QUOTA_EXCEEDED",
                f"Request from the client [{requested_id}] arrived before the next push "
                "interval time", instance_id)
        instance.last_error = "NONE"
        return SubscriptionsAnswer(
            "NONE", None, instance_id, instance.subscription_id, instance.push_interval_ms,
            instance.metrics, self.telemetry_max_bytes,
            tuple(int(c) for c in ACCEPTED_COMPRESSION_TYPES))

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool,
             compression_type: int, metrics: bytes, client: ClientConnection) -> PushAnswer:
        if instance_id is None or instance_id in _RESERVED_IDS:
            return PushAnswer("INVALID_REQUEST", f"Invalid request from the client "
                                                 f"[{instance_id}], invalid client instance id")
        now = self.clock.milliseconds()
        instance = self._instance(instance_id, client, now)
        refusal = self._check_push(instance, subscription_id, terminating, compression_type,
                                   len(metrics), now)
        instance.terminating = terminating
        if refusal is not None:
            instance.last_error = refusal.error
            return refusal
        if metrics:
            try:
                decoded = decode_metrics(
                    metrics, compression_type, self.telemetry_max_bytes,
                    client_instance_id=str(instance_id),
                    client_id=instance.metadata.client_id or "")
            except TelemetryTooLarge as exc:
                instance.last_error = "TELEMETRY_TOO_LARGE"
                return PushAnswer("TELEMETRY_TOO_LARGE", str(exc))
            except InvalidTelemetry as exc:
                instance.last_error = "INVALID_RECORD"
                return PushAnswer("INVALID_RECORD", str(exc))
            if self.exporter is not None:
                self.exporter.export(instance_id, instance.push_interval_ms, decoded.samples,
                                     now)
        instance.last_error = "NONE"
        return PushAnswer("NONE")

    # ------------------------------------------------------------------ internals
    def _check_push(self, instance: ClientInstance, subscription_id: int, terminating: bool,
                    compression_type: int, size: int, now: int) -> PushAnswer | None:
        who = instance.instance_id
        if instance.terminating:
            return PushAnswer("INVALID_REQUEST",
                              f"Client [{who}] sent the previous request with state "
                              "terminating to TRUE, can not accept any requests after that")
        if not instance.accept_push(now) and not terminating:
            return PushAnswer("THROTTLING_QUOTA_EXCEEDED",
                              f"Request from the client [{who}] arrived before the next push "
                              "interval time")
        if subscription_id != instance.subscription_id:
            return PushAnswer("UNKNOWN_SUBSCRIPTION_ID",
                              f"Unknown client subscription id for the client [{who}]")
        if compression_type not in {int(c) for c in CompressionType}:
            return PushAnswer("UNSUPPORTED_COMPRESSION_TYPE",
                              f"Unknown compression type [{compression_type}] is received in "
                              f"telemetry request from [{who}]")
        if size > self.telemetry_max_bytes:
            return PushAnswer("TELEMETRY_TOO_LARGE",
                              f"Telemetry request from [{who}] is larger than the maximum "
                              f"allowed size [{self.telemetry_max_bytes}]")
        return None

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in _RESERVED_IDS:
                return candidate

    def _metadata(self, instance_id: uuid.UUID, client: ClientConnection) -> ClientInstanceMetadata:
        software = self._software.get((client.host, client.port))
        return ClientInstanceMetadata(
            str(instance_id), client.client_id,
            None if software is None else software[0], None if software is None else software[1],
            client.host, str(client.port))

    def _instance(self, instance_id: uuid.UUID, client: ClientConnection,
                  now: int) -> ClientInstance:
        """The instance, created or re-evaluated when new or the subscriptions changed."""
        self._expire(now)
        key, subscriptions = self.subscriptions()
        instance = self._instances.get(instance_id)
        if instance is None or instance.subscriptions_key != key:
            metadata = (self._metadata(instance_id, client) if instance is None
                        else instance.metadata)
            instance = ClientInstance.create(instance_id, metadata, subscriptions, key)
            self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        instance.last_seen_ms = now
        while len(self._instances) > self.max_instances:
            self._instances.popitem(last=False)
        return instance

    def _expire(self, now: int) -> None:
        """Forget instances silent for max(60 s, 3 intervals) (least recently seen first)."""
        for instance_id, instance in list(self._instances.items()):
            if now - instance.last_seen_ms < INSTANCE_EXPIRY_MS:
                break
            if now - instance.last_seen_ms >= max(INSTANCE_EXPIRY_MS,
                                                  3 * instance.push_interval_ms):
                del self._instances[instance_id]
