"""``linger.ms=0`` acks=all producers pipelining hundreds of small requests on a 3-broker
cluster: every record is acknowledged about as soon as the followers fetch, never held until
``replica.lag.time.max.ms`` drops them from the ISR.

The case (measured before the fix: 1,000 records at ~1,600 records/s took 42 s): while the
followers do not fetch, the leader holds each connection's first produce in the purgatory and
stops reading after ``MAX_QUEUED_FRAMES`` requests; librdkafka keeps pipelining. The leader's
next read took all the waiting requests at once and filled the broker-wide
``queued.max.requests`` by itself — and a full limit stopped the leader reading any connection,
the followers' fetches included, which those produces were waiting for. Several producers fill
the limit with their 16 queued requests each, hence the second case (20 for three producers:
the default 500 would need 32 of them)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from .cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "pipelined"
RECORDS = 1000
LAG_TIME_MAX_MS = 30_000
ACKNOWLEDGED_WITHIN_S = 10.0  # a third of the lag time: the ISR shrink cannot be the rescue


@pytest.mark.parametrize(("producers", "queued_max_requests"), [(1, 500), (3, 20)])
def test_pipelined_small_acks_all_produces_do_not_stall_replication(
        make_cluster: Callable[..., ClusterProcesses], producers: int,
        queued_max_requests: int) -> None:
    cluster = make_cluster(overrides={"replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                                      "queued.max.requests": str(queued_max_requests)})
    cluster.create_topic(TOPIC, 1, 3)
    clients = [Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "log_level": 0}) for _ in range(producers)]
    for producer in clients:
        producer.produce(TOPIC, value=b"first", partition=0)
        assert producer.flush(30) == 0
    placement = cluster.partition(TOPIC)
    assert placement is not None and len(placement.isr) == 3
    followers: list[int] = []
    for replica in placement.replicas:
        pid = cluster.broker(replica).pid
        assert pid is not None
        if replica != placement.leader:
            followers.append(pid)
    acknowledged: list[float] = []
    errors: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            acknowledged.append(time.monotonic())

    for pid in followers:
        os.kill(pid, signal.SIGSTOP)
    try:
        # A request per record or so (linger.ms=0 sends what is there), all pipelined while
        # the first one waits: more than queued.max.requests of them.
        for i in range(RECORDS):
            producer = clients[i % producers]
            producer.produce(TOPIC, value=b"%04d" % i, partition=0, on_delivery=delivered)
            producer.poll(0)
            time.sleep(0.001)  # pacing the producers (1,000 records/s), not waiting for a state
        assert not acknowledged  # nothing can be: no follower fetched
    finally:
        resumed = time.monotonic()
        for pid in followers:
            os.kill(pid, signal.SIGCONT)
    for producer in clients:
        assert producer.flush(LAG_TIME_MAX_MS * 2 / 1000) == 0
    assert not errors
    assert len(acknowledged) == RECORDS
    assert max(acknowledged) - resumed < ACKNOWLEDGED_WITHIN_S, (
        f"the last record was acknowledged {max(acknowledged) - resumed:.1f} s after the "
        f"followers resumed")
    after = cluster.partition(TOPIC, via=placement.leader)
    assert after is not None and len(after.isr) == 3  # nobody was dropped to get there
