"""``/console/``: the cluster overview — brokers, controller, partitions and their health.

One DescribeCluster (the brokers with rack and the controller, as ``GET /v1/cluster``) and,
in parallel, one Metadata request (every topic's partitions), summarized by the pure
``summarize``: per broker the replicas it holds and the partitions it leads; cluster-wide the
partitions that are under-replicated (ISR smaller than the replica set, Kafka's
``UnderReplicatedPartitions``) and offline (no leader, Kafka's ``OfflinePartitionsCount``).

Each broker's bytes in and out and messages in per second (the last sample); below them, the
charts of the cluster's traffic (bytes in and out, messages in per second) and
each log dir's disk use, sampled from the brokers' own metrics and DescribeLogDirs by the
console's ``MetricsSampler`` (drawn by ``static/console.js``), a table of the log dirs (used,
total, the replicas' bytes; an offline dir with its error), and links to the Grafana dashboards
when one is configured (``strata.admin.console.settings``).

Authorization: Cluster Describe (as ``GET /v1/cluster``); the partition counts cover only the
topics the caller may Describe (Kafka's Metadata rule).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from strata.admin.console.charts import sampler_of
from strata.admin.console.settings import ConsoleSettings
from strata.admin.console.topics import FIRST_SAMPLE_WAIT_S
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.routers.cluster import describe_cluster
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the overview needs of one partition's metadata."""

    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class Summary:
    topics: int = 0
    partitions: int = 0
    under_replicated: int = 0
    offline: int = 0
    replicas_by_broker: dict[int, int] = field(default_factory=dict)
    leaders_by_broker: dict[int, int] = field(default_factory=dict)


def summarize(topics: Mapping[str, Iterable[PartitionState]]) -> Summary:
    """Counts of ``topics``' partitions: per broker, under-replicated and offline."""
    out = Summary(topics=len(topics))
    for partitions in topics.values():
        for state in partitions:
            out.partitions += 1
            if state.leader < 0:
                out.offline += 1
            else:
                out.leaders_by_broker[state.leader] = out.leaders_by_broker.get(
                    state.leader, 0) + 1
            if len(state.isr) < len(state.replicas):
                out.under_replicated += 1
            for broker in state.replicas:
                out.replicas_by_broker[broker] = out.replicas_by_broker.get(broker, 0) + 1
    return out


def _states(metadata: Any) -> dict[str, list[PartitionState]]:
    return {name: [PartitionState(int(p.leader), tuple(p.replicas), tuple(p.isrs))
                   for p in topic.partitions.values()]
            for name, topic in metadata.topics.items()}


@router.get("/")
async def overview(console: ConsoleDep) -> Response:
    access = console.access
    await access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    gateway = console.gateway
    sampler = sampler_of(console)
    cluster, metadata, _ = await asyncio.gather(gateway.run(describe_cluster, gateway),
                                                gateway.run(gateway.kafka.metadata),
                                                sampler.first_sample(FIRST_SAMPLE_WAIT_S))
    states = _states(metadata)
    visible = await console.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, states)
    states = {name: parts for name, parts in states.items() if name in visible}
    summary = summarize(states)
    latest = sampler.latest_log_dirs
    dirs = sorted(latest.dirs, key=lambda d: (d.broker, d.path)) if latest else []
    settings: ConsoleSettings = console.request.app.state.console_settings
    return console.render(
        "overview.html", cluster=cluster, summary=summary, section="overview", log_dirs=dirs,
        rates={(b.id, name): sampler.store.latest(f"broker:{b.id}:{name}")
               for b in cluster.brokers for name in ("bytes_in", "bytes_out", "records_in")},
        disk_keys=[f"logdir:{d.broker}:{d.path}:used" for d in dirs],
        disk_labels=[f"broker {d.broker} {d.path}" for d in dirs],
        unreachable=latest.unreachable if latest else {},
        grafana=settings.grafana_link("cluster"),
        grafana_replication=settings.grafana_link("replication"))
