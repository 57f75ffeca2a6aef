"""The pushed client metrics on the broker's ``/metrics``: latest value per series, expiring.

``ClientMetricsCollector`` is the manager's exporter and a collector on the broker's
``CollectorRegistry``. Per client instance it keeps the series of its pushes (``otlp.Sample``:
gauges replaced, DELTA counters added up, CUMULATIVE ones replaced) and when it last pushed.

Invariants:

* a client's series disappear once it has not pushed for ``EXPIRY_INTERVALS`` of its push
  intervals (it stopped, or its subscription went away), checked at each export and scrape;
* cardinality is bounded: at most ``max_clients`` clients (the one that pushed least recently
  gives way to a new one) and ``max_series_per_client`` series each (later new series of a
  full client are dropped); both counted in ``strata_client_metrics_dropped_total``;
* a family keeps the kind it was first seen with (a sample of another kind is dropped), and
  no client series may take a name of the broker's own (``strata_*``).

Besides the clients' series it exports ``strata_client_metrics_clients`` (clients whose series
are exported). ``export`` runs on the event loop, ``collect`` on the HTTP server's scrape: a
lock guards the state. Time is the injected clock's.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.telemetry.otlp import COUNTER, Sample
from strata.storage.clock import Clock

EXPIRY_INTERVALS: Final = 3
MAX_CLIENTS: Final = 1000
MAX_SERIES_PER_CLIENT: Final = 2000
_DOC: Final = "Client metric pushed by the client (KIP-714)."

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(slots=True)
class _Client:
    push_interval_ms: int
    last_push_ms: int
    series: dict[SeriesKey, float] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.last_push_ms > EXPIRY_INTERVALS * self.push_interval_ms


class ClientMetricsCollector(Collector):
    def __init__(self, clock: Clock, registry: CollectorRegistry | None = None, *,
                 max_clients: int = MAX_CLIENTS,
                 max_series_per_client: int = MAX_SERIES_PER_CLIENT) -> None:
        self.clock = clock
        self.max_clients = max_clients
        self.max_series_per_client = max_series_per_client
        self.dropped = 0
        self._clients: dict[uuid.UUID, _Client] = {}
        self._lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def export(self, instance_id: uuid.UUID, push_interval_ms: int, samples: list[Sample],
               now_ms: int) -> None:
        with self._lock:
            self._expire(now_ms)
            client = self._clients.get(instance_id)
            if client is None:
                if len(self._clients) >= self.max_clients:
                    oldest = min(self._clients, key=lambda i: self._clients[i].last_push_ms)
                    del self._clients[oldest]
                    self.dropped += 1
                client = self._clients[instance_id] = _Client(push_interval_ms, now_ms)
            client.push_interval_ms = push_interval_ms
            client.last_push_ms = now_ms
            for sample in samples:
                self._record(client, sample)

    def _record(self, client: _Client, sample: Sample) -> None:
        if sample.name.startswith("strata_"):
            self.dropped += 1
            return
        kind = client.kinds.setdefault(sample.name, sample.kind)
        if kind != sample.kind:
            self.dropped += 1
            return
        key = (sample.name, sample.labels)
        previous = client.series.get(key)
        if previous is None and len(client.series) >= self.max_series_per_client:
            self.dropped += 1
            return
        client.series[key] = (previous or 0.0) + sample.value if sample.delta else sample.value

    def _expire(self, now_ms: int) -> None:
        for instance_id in [i for i, c in self._clients.items() if c.expired(now_ms)]:
            del self._clients[instance_id]

    def clients(self) -> list[uuid.UUID]:
        """The client instances whose series are exported now."""
        with self._lock:
            self._expire(self.clock.milliseconds())
            return list(self._clients)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self._expire(self.clock.milliseconds())
            families: dict[str, Metric] = {}
            for client in self._clients.values():
                for (name, labels), value in client.series.items():
                    kind = client.kinds[name]
                    family = families.get(name)
                    if family is None:
                        family = families[name] = Metric(name, _DOC, kind)
                    elif family.type != kind:
                        continue
                    sample_name = name + "_total" if kind == COUNTER else name
                    family.add_sample(sample_name, dict(labels), value)
            clients, dropped = len(self._clients), self.dropped
        yield GaugeMetricFamily("strata_client_metrics_clients",
                                "Client instances whose pushed metrics are exported.",
                                value=clients)
        yield CounterMetricFamily("strata_client_metrics_dropped",
                                  "Client metric series or clients dropped to bound "
                                  "cardinality.", value=dropped)
        yield from families.values()
