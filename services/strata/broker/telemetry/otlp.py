"""Pushed client metrics: OTLP ``MetricsData`` protobuf bytes to Prometheus samples.

A PushTelemetry carries ``opentelemetry.proto.metrics.v1.MetricsData`` (KIP-714), compressed
with the codec the request names (``strata.storage.compression``: gzip, snappy, lz4, zstd).
``decode_metrics`` turns it into ``Sample`` s:

* the name: Kafka's dotted metric name with every character outside ``[a-zA-Z0-9_:]`` made
  ``_`` (``org.apache.kafka.producer.record.queue.time.avg`` →
  ``org_apache_kafka_producer_record_queue_time_avg``), as OpenTelemetry's Prometheus exporter
  names them;
* the kind: a gauge, or a monotonic sum, exported as a Prometheus counter (its family name
  without ``_total``, which the exposition adds back); a DELTA sum (Kafka asks for deltas,
  ``delta_temporality`` true) is added to what the series had, a CUMULATIVE one replaces it;
  a non-monotonic sum is a gauge; histograms and summaries are not exported (counted in
  ``DecodedMetrics.skipped``);
* the labels: ``client_instance_id``, ``client_id`` and the data point's attributes (keys made
  label names the same way; one that would shadow the first two is dropped).

Refusals: bytes that do not decompress or parse are ``InvalidTelemetry`` (INVALID_RECORD);
more than ``max_bytes`` once decompressed is ``TelemetryTooLarge`` (TELEMETRY_TOO_LARGE).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from strata.storage.compression import decompress_bounded
from strata.storage.errors import RecordTooLargeError, StorageError

GAUGE: Final = "gauge"
COUNTER: Final = "counter"
AGGREGATION_TEMPORALITY_DELTA: Final = 1
CLIENT_LABELS: Final = ("client_instance_id", "client_id")

_INVALID: Final = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL: Final = re.compile(r"[^a-zA-Z0-9_]")


class InvalidTelemetry(ValueError):
    """The pushed metrics do not decompress or are not OTLP MetricsData (INVALID_RECORD)."""


class TelemetryTooLarge(ValueError):
    """The pushed metrics exceed ``telemetry.max.bytes`` decompressed (TELEMETRY_TOO_LARGE)."""


def prometheus_name(kafka_name: str) -> str:
    """A Kafka client metric name as a Prometheus metric name."""
    name = _INVALID.sub("_", kafka_name)
    return "_" + name if not name or name[0].isdigit() else name


def label_name(key: str) -> str:
    name = _INVALID_LABEL.sub("_", key)
    return "_" + name if not name or name[0].isdigit() else name


@dataclass(frozen=True, slots=True)
class Sample:
    """One data point: ``name`` is the family (a counter's without ``_total``)."""

    name: str
    kind: str
    labels: tuple[tuple[str, str], ...]
    value: float
    delta: bool = False


@dataclass(slots=True)
class DecodedMetrics:
    samples: list[Sample] = field(default_factory=list)
    skipped: int = 0


def _any_value(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("string_value", "int_value", "double_value"):
        return str(getattr(value, kind))
    return str(value).strip()  # arrays, maps, bytes: their text form


def _labels(client: tuple[tuple[str, str], ...],
            attributes: Iterable[KeyValue]) -> tuple[tuple[str, str], ...]:
    labels = dict(client)
    for kv in attributes:
        key = label_name(kv.key)
        if key not in labels:
            labels[key] = _any_value(kv.value)
    return tuple(sorted(labels.items()))


def decode_metrics(payload: bytes, compression_type: int, max_bytes: int, *,
                   client_instance_id: str, client_id: str) -> DecodedMetrics:
    """The samples of one push (see the module docstring for the mapping and refusals)."""
    try:
        raw = decompress_bounded(compression_type, payload, max_bytes)
    except RecordTooLargeError:
        raise TelemetryTooLarge(
            f"decompressed metrics exceed telemetry.max.bytes {max_bytes}") from None
    except StorageError as exc:
        raise InvalidTelemetry(f"metrics do not decompress: {exc}") from None
    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as exc:
        raise InvalidTelemetry(f"metrics are not OTLP MetricsData: {exc}") from None
    client = ((CLIENT_LABELS[0], client_instance_id), (CLIENT_LABELS[1], client_id))
    decoded = DecodedMetrics()
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                _decode_metric(metric, client, decoded)
    return decoded


def _decode_metric(metric: metrics_pb2.Metric, client: tuple[tuple[str, str], ...],
                   decoded: DecodedMetrics) -> None:
    name = prometheus_name(metric.name)
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        points, sample_kind, delta = metric.gauge.data_points, GAUGE, False
    elif kind == "sum":
        monotonic = metric.sum.is_monotonic
        sample_kind = COUNTER if monotonic else GAUGE
        delta = monotonic and (
            metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA)
        points = metric.sum.data_points
        if monotonic and name.endswith("_total"):
            name = name[:-len("_total")]
    else:
        decoded.skipped += 1
        return
    for point in points:
        which = point.WhichOneof("value")
        value = float(point.as_int) if which == "as_int" else float(point.as_double)
        decoded.samples.append(
            Sample(name, sample_kind, _labels(client, point.attributes), value, delta))
