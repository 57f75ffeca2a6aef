"""The fetch session cache's metrics (KIP-227), Kafka's ``FetchSessionCache`` metrics as
Strata's Prometheus series, read at scrape time from the broker's ``FetchSessionCache``:

* ``strata_fetch_session_incremental_fetch_sessions``: sessions cached (Kafka's
  ``kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions``);
* ``strata_fetch_session_incremental_fetch_partitions_cached``: partitions over all sessions
  (``NumIncrementalFetchPartitionsCached``);
* ``strata_fetch_session_evictions_total``: sessions evicted for new ones
  (``IncrementalFetchSessionEvictionsPerSec``, as a counter);
* ``strata_fetch_session_incremental_fetches_total``: incremental Fetch requests served in a
  session (Strata's; Kafka has no such counter).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.fetch_session import FetchSessionCache


class FetchSessionMetrics(Collector):
    def __init__(self, registry: CollectorRegistry, cache: FetchSessionCache) -> None:
        self._cache = cache
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        cache = self._cache
        yield GaugeMetricFamily("strata_fetch_session_incremental_fetch_sessions",
                                "Fetch sessions in the cache.", value=len(cache))
        yield GaugeMetricFamily("strata_fetch_session_incremental_fetch_partitions_cached",
                                "Partitions cached over all fetch sessions.",
                                value=cache.partitions_cached)
        yield CounterMetricFamily("strata_fetch_session_evictions",
                                  "Fetch sessions evicted for new ones.", value=cache.evictions)
        yield CounterMetricFamily("strata_fetch_session_incremental_fetches",
                                  "Incremental Fetch requests served in a fetch session.",
                                  value=cache.incremental_fetches)
