"""The operator's settings, from ``STRATA_OPERATOR_*`` environment variables (read once).

- ``STRATA_OPERATOR_RECONCILE_INTERVAL`` (seconds, default 30): how often every Broker and
  Topic is re-checked (drift repair, rolling progress, topic drift revert).
- ``STRATA_OPERATOR_METRICS_PORT`` (default 9090; 0 = off): Prometheus metrics.
- ``STRATA_OPERATOR_KAFKA_TIMEOUT`` (seconds, default 5): one Kafka admin request.
- ``STRATA_OPERATOR_BOOTSTRAP_SERVERS``: use this bootstrap for every Broker instead of its
  client Service (an operator outside the cluster, or a test's local brokers).
- ``STRATA_OPERATOR_TOPIC_DELETE_TIMEOUT`` (seconds, default 300): how long a Topic deletion
  keeps retrying an unreachable cluster before the finalizer is released anyway.
- ``STRATA_OPERATOR_PEERING_PRIORITY`` (default 0: drawn at random at start): this replica's
  kopf peering priority; with ``--peering`` only the highest-priority replica works.
- ``STRATA_OPERATOR_REBALANCE_BATCH_SIZE`` (default 10): partitions per
  AlterPartitionReassignments batch of a rebalance (``rebalance.py``).
- ``STRATA_OPERATOR_REBALANCE_THROTTLE`` (bytes/s, default 52428800 = 50 MiB/s; 0 = none): the
  replication throttle of each batch's moving replicas (``throttle.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Settings:
    reconcile_interval: float = 30.0
    metrics_port: int = 9090
    kafka_timeout: float = 5.0
    bootstrap_override: str = ""
    topic_delete_timeout: float = 300.0
    peering_priority: int = 0
    rebalance_batch_size: int = 10
    rebalance_throttle: int = 50 * 1024 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        prefix = "STRATA_OPERATOR_"
        return cls(
            reconcile_interval=float(env.get(prefix + "RECONCILE_INTERVAL", "30")),
            metrics_port=int(env.get(prefix + "METRICS_PORT", "9090")),
            kafka_timeout=float(env.get(prefix + "KAFKA_TIMEOUT", "5")),
            bootstrap_override=env.get(prefix + "BOOTSTRAP_SERVERS", ""),
            topic_delete_timeout=float(env.get(prefix + "TOPIC_DELETE_TIMEOUT", "300")),
            peering_priority=int(env.get(prefix + "PEERING_PRIORITY", "0")),
            rebalance_batch_size=int(env.get(prefix + "REBALANCE_BATCH_SIZE", "10")),
            rebalance_throttle=int(env.get(prefix + "REBALANCE_THROTTLE", "52428800")),
        )


SETTINGS = Settings.from_env()
