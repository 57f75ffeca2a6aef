"""The ISR under faults: a stalled follower leaves and rejoins; min.insync.replicas refuses
acks=all writes that could not be made durable while acks=1 goes on."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Producer

from .cluster_processes import BackgroundProducer, ClusterProcesses, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "payments"


def test_stalled_follower_leaves_the_isr_and_rejoins(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    # The lease outlives the lag time, so the stall is seen by the leader first.
    cluster = make_cluster(overrides={"broker.session.timeout.ms": "20000"})
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    start = cluster.partition(TOPIC)
    assert start is not None
    follower = next(r for r in start.replicas if r != start.leader)
    pid = cluster.broker(follower).pid
    assert pid is not None
    with BackgroundProducer(cluster.bootstrap, TOPIC, {"acks": "all"}) as producer:
        cluster.wait_for(lambda: producer.acked.count() >= 500, "records acknowledged")
        os.kill(pid, signal.SIGSTOP)
        try:
            cluster.wait_for(lambda: (p := cluster.partition(TOPIC, via=start.leader))
                             is not None and follower not in p.isr and len(p.isr) == 2,
                             f"follower {follower} out of the ISR")
            before = producer.acked.count()
            cluster.wait_for(lambda: producer.acked.count() >= before + 1000,
                             "acks=all writes continuing with two in-sync replicas")
        finally:
            os.kill(pid, signal.SIGCONT)
        cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                         and follower in p.isr, f"follower {follower} back in the ISR")
        acked = producer.stop()
    assert not acked.errors
    log = read_all(cluster.live_bootstrap(), TOPIC, 1, len(acked.records))
    by_offset = dict(log[0])
    assert all(by_offset.get(o) == v for (_, o), v in acked.records.items())


def _produce_one(bootstrap: str, acks: str, value: bytes) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 10000,
                         "log_level": 0})
    outcome: list[KafkaError | None] = []
    producer.produce(TOPIC, value=value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_min_insync_replicas_refuses_acks_all_but_not_acks_1(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    start = cluster.partition(TOPIC)
    assert start is not None
    assert _produce_one(cluster.bootstrap, "all", b"durable") is None
    for node in start.replicas:
        if node != start.leader:
            cluster.broker(node).kill()
    cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                     and p.isr == (start.leader,), "the ISR down to the leader")
    error = _produce_one(cluster.live_bootstrap(), "all", b"refused")
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
    assert _produce_one(cluster.live_bootstrap(), "1", b"accepted") is None
    log = read_all(cluster.live_bootstrap(), TOPIC, 1, 2, timeout=15)
    assert [v for _, v in log[0]] == [b"durable", b"accepted"]
