"""Followers replicate in incremental fetch sessions (KIP-227) and survive losing them.

Three brokers, a 12-partition topic with replication factor 3: every leader ends up holding one
incremental session per follower, and its count of incremental fetches grows while acks=all
writes flow. Then a leader is killed with ``kill -9``, restarted and made leader again (a
preferred election): its sessions died with it, so the followers' fetchers for it, which still
hold the old session id, are refused (FETCH_SESSION_ID_NOT_FOUND) or lost their connection, and
open new sessions with a full fetch; every partition's ISR is whole again, and every
acknowledged record is read back at its offset, once.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import ElectionType, TopicPartition

from .cluster_processes import BackgroundProducer, ClusterProcesses, read_all
from .test_failover import check_delivery

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "sessions"
PARTITIONS = 12


def session_metrics(cluster: ClusterProcesses, node: int) -> tuple[float, float]:
    """(incremental fetch sessions held, incremental fetches served) from broker ``node``'s
    own /metrics."""
    url = f"http://127.0.0.1:{cluster.broker(node).http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()

    def value(name: str) -> float:
        found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
        assert found is not None, f"{name} missing from broker {node}'s metrics"
        return float(found.group(1))

    return (value("strata_fetch_session_incremental_fetch_sessions"),
            value("strata_fetch_session_incremental_fetches_total"))


def leaders(cluster: ClusterProcesses) -> dict[int, int]:
    """Partition -> leader, for partitions whose ISR holds all three replicas (else absent)."""
    topics = cluster.metadata().topics
    meta = topics.get(TOPIC)
    if meta is None or meta.error is not None:
        return {}
    return {i: p.leader for i, p in meta.partitions.items() if len(p.isrs) == 3}


def test_followers_fetch_in_sessions_and_reopen_them_after_a_leader_restart(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_for(lambda: len(leaders(cluster)) == PARTITIONS,
                     "every partition with a leader and three in-sync replicas")
    led = leaders(cluster)
    victim = led[0]
    with BackgroundProducer(cluster.bootstrap, TOPIC, {
            "acks": "all", "enable.idempotence": True, "linger.ms": 5}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= 3000, "3000 records acknowledged")
        for node in sorted(set(led.values())):
            sessions, _ = session_metrics(cluster, node)
            assert sessions == 2, f"broker {node} holds {sessions} fetch sessions, not one " \
                                  "per follower"
        _, before = session_metrics(cluster, victim)
        cluster.wait_for(lambda: session_metrics(cluster, victim)[1] > before + 10,
                         f"broker {victim} serving incremental fetches")

        cluster.broker(victim).kill()
        at_kill = producer.acked.count()
        cluster.wait_for(lambda: producer.acked.count() >= at_kill + 2000,
                         "2000 more records acknowledged without the killed leader")
        cluster.broker(victim).start()
        cluster.wait_for(lambda: len(leaders(cluster)) == PARTITIONS,
                         f"broker {victim} back in every partition's ISR", timeout=60)
        preferred = [TopicPartition(TOPIC, p) for p, node in led.items() if node == victim]
        results = cluster.admin().elect_leaders(ElectionType.PREFERRED,
                                                preferred).result(timeout=30)
        assert all(error is None for error in results.values()), results
        cluster.wait_for(lambda: all(leaders(cluster).get(tp.partition) == victim
                                     for tp in preferred), f"broker {victim} leading again")
        cluster.wait_for(lambda: session_metrics(cluster, victim)[0] == 2,
                         f"the followers of broker {victim} in new sessions with it",
                         timeout=60)
        at_return = producer.acked.count()
        cluster.wait_for(lambda: producer.acked.count() >= at_return + 2000,
                         "2000 more records acknowledged with every broker back")
        acked = producer.stop()
    assert not acked.errors, acked.errors[:3]
    check_delivery(acked.records, read_all(cluster.live_bootstrap(), TOPIC, PARTITIONS,
                                           len(acked.records)))
