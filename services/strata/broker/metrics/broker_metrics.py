"""A broker's metrics registry: one ``CollectorRegistry`` per ``KafkaServer`` and the layers'
metrics on it (``request_metrics``, ``log_metrics``, ``replication_metrics``,
``group_metrics``, ``quota_metrics``), served at ``http.port`` ``/metrics`` in Prometheus'
text format.

Owns nothing but the wiring: each layer defines its own series. A registry per broker (not
prometheus-client's global one) keeps brokers started in one process apart.

The log manager (flush / retention / cleaner events, recovery time), the purgatories and the
clock are taken from the ``ReplicaManager`` whose ``partitions`` method is passed in, unless
given explicitly (``replica_manager=``); without one (bare unit tests) those series are left
out. ``quotas`` gives the broker's client quotas (none: no quota series). ``controller`` says
whether this broker is the active controller and how many leader changes it wrote (a broker
without a cluster: its own controller, none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest

from strata.broker.group.classic_group import ClassicGroup
from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.metrics.group_metrics import GroupMetrics
from strata.broker.metrics.log_metrics import LogMetrics
from strata.broker.metrics.quota_metrics import QuotaMetrics
from strata.broker.metrics.replication_metrics import ReplicationMetrics
from strata.broker.metrics.request_metrics import RequestMetrics
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.replication.partition import Partition
from strata.broker.replication.replica_manager import ReplicaManager

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class BrokerMetrics:
    def __init__(self, served_api_keys: Iterable[int],
                 partitions: Callable[[], Sequence[Partition]],
                 partition: Callable[[str, int], Partition | None],
                 groups: Callable[[], list[ClassicGroup]], *,
                 replica_manager: ReplicaManager | None = None,
                 controller: Callable[[], tuple[bool, int]] | None = None,
                 quotas: Callable[[], BrokerQuotas | None] | None = None,
                 consumer_groups: Callable[[], list[ConsumerGroup]] = list) -> None:
        if replica_manager is None:
            owner = getattr(partitions, "__self__", None)
            replica_manager = owner if isinstance(owner, ReplicaManager) else None
        self.registry = CollectorRegistry(auto_describe=False)
        manager = replica_manager
        self.requests = RequestMetrics(
            self.registry, served_api_keys,
            None if manager is None else lambda: {
                "Produce": len(manager.produce_purgatory),
                "Fetch": len(manager.fetch_purgatory)})
        self.log = LogMetrics(self.registry, partitions,
                              None if manager is None else manager.log_manager)
        self.replication = ReplicationMetrics(
            self.registry, partitions, None if manager is None else manager.clock.milliseconds)
        # A broker without a cluster is its own controller and never elects anyone.
        self.replication.track_controller(self.registry, controller or (lambda: (True, 0)))
        self.groups = GroupMetrics(self.registry, groups, partition, consumer_groups)
        if quotas is not None and manager is not None:
            self.quotas = QuotaMetrics(self.registry, quotas, manager.clock.milliseconds)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text exposition format."""
        return generate_latest(self.registry)
