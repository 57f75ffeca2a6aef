"""Leader failover under acks=all: nothing acknowledged is lost, the dead leader comes back.

The issue's first fault: a producer sends with acks=all (idempotent) to a topic with
replication factor 3 and ``min.insync.replicas=2``; the partition's leader is killed with
SIGKILL mid-stream. Every record the producer saw acknowledged must then be read back, once,
at its acknowledged offset, in order. The killed broker restarts, truncates any tail it had
that the new leader does not, catches up and rejoins the ISR — checked by making it the only
live replica and reading everything back from it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from .cluster_processes import BackgroundProducer, ClusterProcesses, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The delivery semantics do not depend on the store: SQLite only.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])

TOPIC = "orders"


def check_delivery(acked: dict[tuple[int, int], bytes],
                   log: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged record at its offset; offsets unique and increasing; no value twice."""
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(set(offsets)), f"partition {partition}: offsets out of order"
    by_offset = {(p, o): v for p, records in log.items() for o, v in records}
    missing = [k for k, v in acked.items() if by_offset.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    counts = Counter(v for records in log.values() for _, v in records)
    assert max(counts.values()) == 1, "a value was written twice"


def test_leader_killed_under_acks_all(make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    first = cluster.partition(TOPIC)
    assert first is not None and len(first.isr) == 3
    old_leader = first.leader
    with BackgroundProducer(cluster.bootstrap, TOPIC, {
            "acks": "all", "enable.idempotence": True}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= 2000, "2000 records acknowledged")
        cluster.broker(old_leader).kill()
        at_kill = producer.acked.count()
        cluster.wait_for(lambda: producer.acked.count() >= at_kill + 2000,
                         "2000 more records acknowledged by the new leader")
        acked = producer.stop()
    assert not acked.errors, acked.errors[:3]
    after = cluster.partition(TOPIC)
    assert after is not None and after.leader not in (old_leader, -1)
    assert old_leader not in after.isr
    log = read_all(cluster.live_bootstrap(), TOPIC, 1, len(acked.records))
    check_delivery(acked.records, log)

    # The killed broker restarts, catches up and rejoins the ISR ...
    cluster.broker(old_leader).start()
    cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                     and old_leader in p.isr, f"broker {old_leader} back in the ISR")
    # ... with every acknowledged record: make it the only live replica and read from it.
    for node in after.replicas:
        if node != old_leader:
            cluster.broker(node).kill()
    cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                     and p.leader == old_leader, f"broker {old_leader} leads alone")
    check_delivery(acked.records, read_all(cluster.live_bootstrap(), TOPIC, 1,
                                           len(acked.records)))


@SQLITE_ONLY
def test_acks_all_with_retries_is_at_least_once(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    """Without idempotence a retried batch may land twice, but none that was acknowledged is
    lost (the seed's at-least-once)."""
    cluster = make_cluster()
    cluster.create_topic(TOPIC, 2, 3, {"min.insync.replicas": "2"})
    victim = cluster.partition(TOPIC, 0)
    assert victim is not None
    with BackgroundProducer(cluster.bootstrap, TOPIC, {
            "acks": "all", "enable.idempotence": False, "retries": 1000}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= 2000, "2000 records acknowledged")
        cluster.broker(victim.leader).kill()
        at_kill = producer.acked.count()
        cluster.wait_for(lambda: producer.acked.count() >= at_kill + 2000,
                         "records acknowledged after the failover")
        acked = producer.stop()
    assert not acked.errors
    log = read_all(cluster.live_bootstrap(), TOPIC, 2, len(acked.records))
    by_offset = {(p, o): v for p, records in log.items() for o, v in records}
    assert all(by_offset.get(k) == v for k, v in acked.records.items())


@SQLITE_ONLY
def test_acks_0_is_at_most_once(make_cluster: Callable[..., ClusterProcesses]) -> None:
    """acks=0: records sent into a dying leader may be lost, none is written twice."""
    cluster = make_cluster()
    cluster.create_topic(TOPIC, 1, 3)
    victim = cluster.partition(TOPIC)
    assert victim is not None
    with BackgroundProducer(cluster.bootstrap, TOPIC, {"acks": "0"}) as producer:
        cluster.wait_for(lambda: producer.acked.sent >= 3000, "3000 records sent")
        cluster.broker(victim.leader).kill()
        at_kill = producer.acked.sent
        cluster.wait_for(lambda: producer.acked.sent >= at_kill + 3000, "records sent after")
        sent = producer.stop().sent
    cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None and p.leader >= 0,
                     "a new leader")
    log = read_all(cluster.live_bootstrap(), TOPIC, 1, 1, timeout=15)
    values = [v for _, v in log[0]]
    assert len(values) == len(set(values)) <= sent
    assert values, "nothing at all reached the log"
