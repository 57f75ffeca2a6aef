"""The request layer's metrics: every Kafka API call's latency, count and errors, and the wire.

Defined once here (one module per layer), named ``strata_request_*`` / ``strata_network_*``, on a
registry of the broker's own (one per ``KafkaServer``, so brokers in one test process never
share series):

* ``strata_request_latency_seconds{api}``: a histogram of the time from a request's decoding
  to its response being handed to the socket (Kafka's ``TotalTimeMs``, minus queueing);
* ``strata_request_total{api}`` and ``strata_request_errors_total{api, error}``: requests, and
  each non-zero error code found in their responses (top level and per topic/partition/group,
  Kafka's ``ErrorsPerSec`` counts every one), by Kafka's error name;
* ``strata_network_received_bytes_total`` / ``strata_network_sent_bytes_total``: request and
  response frames (response bytes sent by ``sendfile`` included);
* ``strata_network_connections``: open client connections;
* ``strata_request_purgatory_size{purgatory}``: requests waiting in a purgatory (``Produce``:
  acks=all waiting for the high watermark; ``Fetch``: long polls), read at scrape time —
  Kafka's ``PurgatorySize``.

Every (api) series starts at zero for each API the broker serves, so dashboards see a value
before the first request. Cost on the hot path: one ``time.perf_counter`` pair and a few
counter increments per request on children looked up once, plus a walk over the response's
error fields for the (small) control-plane responses; Produce and Fetch responses are
pre-encoded bytes whose handlers list their per-partition error codes beside them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

LATENCY_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                          2.5, 5.0, 10.0, 30.0)


def api_label(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``FindCoordinator``...)."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry, served: Iterable[int],
                 purgatories: Callable[[], Mapping[str, int]] | None = None) -> None:
        self.latency = Histogram("strata_request_latency_seconds",
                                 "Time to handle a request, by API.", ["api"],
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self.requests = Counter("strata_request", "Requests handled, by API.", ["api"],
                                registry=registry)
        self.errors = Counter("strata_request_errors",
                              "Error codes in responses, by API and Kafka error name.",
                              ["api", "error"], registry=registry)
        self.received_bytes = Counter("strata_network_received_bytes",
                                      "Bytes of request frames received.", registry=registry)
        self.sent_bytes = Counter("strata_network_sent_bytes",
                                  "Bytes of response frames sent.", registry=registry)
        self.connections = Gauge("strata_network_connections", "Open client connections.",
                                 registry=registry)
        self._labels = {key: api_label(key) for key in served}
        # (latency, requests) children per served API, looked up once: no labels() per request.
        self._children = {key: (self.latency.labels(label), self.requests.labels(label))
                          for key, label in self._labels.items()}
        if purgatories is not None:
            registry.register(_PurgatorySize(purgatories))

    def observe(self, api_key: int, seconds: float, response: Any) -> None:
        """One handled request: its latency, and the error codes its response carries."""
        children = self._children.get(api_key)
        if children is None:
            label = api_label(api_key)
            children = (self.latency.labels(label), self.requests.labels(label))
        children[0].observe(seconds)
        children[1].inc()
        if response is None:
            return
        codes = error_codes(response)
        if codes:
            label = self._labels.get(api_key) or api_label(api_key)
            for code in codes:
                self.errors.labels(label, _error_name(code)).inc()


class _PurgatorySize(Collector):
    def __init__(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        self._sizes = sizes

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("strata_request_purgatory_size",
                                 "Requests waiting in a purgatory.", labels=["purgatory"])
        for name, waiting in sorted(self._sizes().items()):
            size.add_metric([name], waiting)
        yield size


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def error_codes(response: Any) -> list[int]:
    """Every non-zero ``error_code`` in a kio response (nested entities included); for a
    pre-encoded response (Produce, Fetch: the connection's ``Response``), the non-zero codes
    its handler listed in ``error_codes``."""
    listed = getattr(response, "error_codes", None)
    if listed is not None:
        return [code for code in listed if code]
    found: list[int] = []
    _collect(response, found)
    return found


# Per response class, its fields' names (None: not a dataclass): a Metadata response for
# thousands of partitions is walked entity by entity, and ``dataclasses.fields`` is slow.
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        names = (tuple(f.name for f in dataclasses.fields(cls))
                 if dataclasses.is_dataclass(cls) else None)
        _FIELD_NAMES[cls] = names
        return names


def _collect(entity: Any, found: list[int]) -> None:
    names = _field_names(type(entity))
    if names is None:
        code = getattr(entity, "error_code", 0)
        if isinstance(code, int) and code:
            found.append(int(code))
        return
    for name in names:
        value = getattr(entity, name)
        if name == "error_code":
            if value:
                found.append(int(value))
        elif isinstance(value, tuple):
            if value and _field_names(type(value[0])) is not None:
                for item in value:
                    _collect(item, found)
        elif _field_names(type(value)) is not None:
            _collect(value, found)
