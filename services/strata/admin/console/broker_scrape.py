"""What the console reads from one broker's ``/metrics``: its traffic totals and its groups' lag.

Pure: Prometheus' text exposition format in, a ``Scrape`` out. Only the series the console
charts are read (every other line is skipped by its name before anything is parsed, so a
1,000-partition broker's page costs little):

* ``strata_log_appended_bytes_total`` / ``strata_log_appended_records_total`` (per topic and
  partition, counted by the partition's leader on produce: Kafka's ``BytesInPerSec`` and
  ``MessagesInPerSec``), summed per topic and per broker;
* ``strata_log_read_bytes_total`` (bytes fetches read: consumers' and followers', Kafka's
  ``BytesOutPerSec``), summed per broker;
* ``strata_request_total{api}`` (requests handled, Kafka's ``RequestsPerSec``), summed per
  broker, and ``strata_replication_under_replicated_partitions`` (the partitions the broker
  leads whose ISR is smaller than their replicas: Kafka's ``UnderReplicatedPartitions``);
* ``strata_group_lag_records{group, topic, partition}`` and
  ``strata_group_committed_offset{...}``: reported by a group's coordinator for the
  partitions it holds a replica of. How far the committed offsets moved between two scrapes
  (``committed_increase``: per partition, forward moves only, so a reset back or a deleted
  group is not a negative rate) is the records the groups consumed: the console's
  "messages out" (Kafka exports no such rate; fetches are counted in bytes).

Counters are totals; ``strata.admin.console.series`` turns them into rates. A malformed line
is skipped (a scrape never fails the console).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

APPENDED_BYTES: Final = "strata_log_appended_bytes_total"
APPENDED_RECORDS: Final = "strata_log_appended_records_total"
READ_BYTES: Final = "strata_log_read_bytes_total"
GROUP_LAG: Final = "strata_group_lag_records"
GROUP_COMMITTED: Final = "strata_group_committed_offset"
REQUESTS: Final = "strata_request_total"
UNDER_REPLICATED: Final = "strata_replication_under_replicated_partitions"
_WANTED: Final = (APPENDED_BYTES, APPENDED_RECORDS, READ_BYTES, GROUP_LAG, GROUP_COMMITTED,
                  REQUESTS, UNDER_REPLICATED)
_LABEL: Final = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE: Final = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

GroupPartition = tuple[str, str, int]


@dataclass(slots=True)
class Scrape:
    """One broker's totals (counters) and group lags (gauges) at one scrape."""

    bytes_in: float = 0.0
    records_in: float = 0.0
    bytes_out: float = 0.0
    requests: float = 0.0
    under_replicated: float | None = None  # None: the page had no such gauge
    topic_bytes_in: dict[str, float] = field(default_factory=dict)
    topic_records_in: dict[str, float] = field(default_factory=dict)
    group_lag: dict[GroupPartition, float] = field(default_factory=dict)
    group_committed: dict[GroupPartition, float] = field(default_factory=dict)


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], value)


def _sample(line: str) -> tuple[str, dict[str, str], float] | None:
    """``name{labels} value [timestamp]`` as (name, labels, value); None if malformed."""
    brace = line.find("{")
    if brace >= 0:
        close = line.rfind("}")
        if close < brace:
            return None
        name, body, rest = line[:brace], line[brace + 1:close], line[close + 1:]
        labels = {k: _unescape(v) for k, v in _LABEL.findall(body)}
    else:
        name, _, rest = line.partition(" ")
        labels = {}
    parts = rest.split()
    if not parts:
        return None
    try:
        value = float(parts[0])
    except ValueError:
        return None
    if math.isnan(value) or math.isinf(value):
        return None
    return name, labels, value


def parse(text: str) -> Scrape:
    """The console's series of one ``/metrics`` page."""
    out = Scrape()
    for line in text.splitlines():
        if not line.startswith(_WANTED):
            continue
        sample = _sample(line)
        if sample is None:
            continue
        name, labels, value = sample
        topic = labels.get("topic", "")
        if name == APPENDED_BYTES:
            out.bytes_in += value
            out.topic_bytes_in[topic] = out.topic_bytes_in.get(topic, 0.0) + value
        elif name == APPENDED_RECORDS:
            out.records_in += value
            out.topic_records_in[topic] = out.topic_records_in.get(topic, 0.0) + value
        elif name == READ_BYTES:
            out.bytes_out += value
        elif name == REQUESTS:
            out.requests += value
        elif name == UNDER_REPLICATED:
            out.under_replicated = value
        elif name in (GROUP_LAG, GROUP_COMMITTED):
            try:
                key = (labels["group"], topic, int(labels.get("partition", "")))
            except (KeyError, ValueError):
                continue
            (out.group_lag if name == GROUP_LAG else out.group_committed)[key] = value
    return out


def committed_offsets(scrapes: list[Scrape]) -> dict[GroupPartition, float]:
    """Every group's committed offsets over the brokers' scrapes (the largest reported)."""
    out: dict[GroupPartition, float] = {}
    for scrape in scrapes:
        for key, offset in scrape.group_committed.items():
            out[key] = max(offset, out.get(key, offset))
    return out


def committed_increase(before: dict[GroupPartition, float],
                       now: dict[GroupPartition, float]) -> float:
    """Records the groups committed past between two samples: per partition known in both,
    how far its committed offset moved forward."""
    return sum(max(0.0, offset - before[key]) for key, offset in now.items() if key in before)


def group_lags(scrapes: list[Scrape]) -> dict[str, float]:
    """Each group's total lag over the brokers' scrapes: per partition the largest lag any
    broker reports (a partition reported twice, e.g. while the coordinator moves, counts
    once), summed per group."""
    per_partition: dict[GroupPartition, float] = {}
    for scrape in scrapes:
        for key, lag in scrape.group_lag.items():
            per_partition[key] = max(lag, per_partition.get(key, lag))
    totals: dict[str, float] = {}
    for (group, _, _), lag in per_partition.items():
        totals[group] = totals.get(group, 0.0) + lag
    return totals
