"""The client-quota layer's metrics: measured rates and throttling per quota sensor.

Defined once here, named ``strata_quota_*``, computed at scrape time (a ``Collector``) from
the broker's ``BrokerQuotas`` — nothing on the request path. Labels are Kafka's sensor tags:
``quota_type`` (``Produce``, ``Fetch``, ``Request``, as Kafka's ``type=`` MBean key), ``user``
and ``client_id`` ("" where the quota in force is not per user or not per client id, so one
series per quota that clients share):

* ``strata_quota_rate``: the measured rate over the quota window — bytes per second for
  Produce and Fetch, percent of one thread's time for Request (Kafka's ``byte-rate`` and
  ``request-time``);
* ``strata_quota_throttle_time_ms_total`` and ``strata_quota_throttled_requests_total``: the
  throttle time given and how many responses carried one (Kafka's ``throttle-time``);
* ``strata_quota_limit``: the quota in force for the series' tags;
* ``strata_quota_exempt_request_time`` (no labels): the time of requests exempt from the
  request quota (inter-broker, a follower's Fetch, SASL authentication), percent of the event
  loop, measured while any ``request_percentage`` is set (Kafka's ``exempt-request-time``).

Only clients that a quota applies to are measured, so a broker without quotas exports none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.quotas.broker_quotas import BrokerQuotas

LABELS = ["quota_type", "user", "client_id"]


class QuotaMetrics(Collector):
    def __init__(self, registry: CollectorRegistry, quotas: Callable[[], BrokerQuotas | None],
                 now_ms: Callable[[], int]) -> None:
        self._quotas = quotas
        self._now_ms = now_ms
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rate = GaugeMetricFamily("strata_quota_rate", "Measured rate against a client quota "
                                 "(bytes/s; percent of a thread for Request).", labels=LABELS)
        limit = GaugeMetricFamily("strata_quota_limit", "The client quota in force.",
                                  labels=LABELS)
        throttle = CounterMetricFamily("strata_quota_throttle_time_ms",
                                       "Throttle time given to clients over their quota.",
                                       labels=LABELS)
        throttled = CounterMetricFamily("strata_quota_throttled_requests",
                                        "Responses that carried a throttle time.", labels=LABELS)
        exempt = GaugeMetricFamily("strata_quota_exempt_request_time",
                                   "Thread time of requests exempt from request quotas "
                                   "(percent of the event loop).")
        quotas = self._quotas()
        if quotas is not None:
            now = self._now_ms()
            exempt_rate = quotas.request.exempt_rate(now)
            if exempt_rate is not None:
                exempt.add_metric([], exempt_rate)
            for quota_type, manager in (("Produce", quotas.produce), ("Fetch", quotas.fetch),
                                        ("Request", quotas.request)):
                for (user, client_id), value in sorted(manager.measured(now).items()):
                    labels = [quota_type, user, client_id]
                    rate.add_metric(labels, value)
                    resolved = manager.quotas.resolve(manager.key, user, client_id)
                    if resolved.limit is not None:
                        limit.add_metric(labels, resolved.limit)
                for (user, client_id), stats in sorted(manager.throttles.items()):
                    labels = [quota_type, user, client_id]
                    throttle.add_metric(labels, stats.total_ms)
                    throttled.add_metric(labels, stats.count)
        yield from (rate, limit, throttle, throttled, exempt)
