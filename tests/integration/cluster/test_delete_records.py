"""DeleteRecords on a 3-broker cluster (Kafka's ``DelayedDeleteRecords``), through
confluent-kafka's admin client: answered with the low watermark once every live follower moved
its log start offset past the deleted records; a stalled follower (registered, not fetching)
holds the answer back — REQUEST_TIMED_OUT — until its lease runs out and it no longer counts."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "ledger"
SESSION_TIMEOUT_MS = 6000


def _delete_before(bootstrap: str, offset: int, timeout_s: float) -> tuple[int, int]:
    """(error code, low watermark) of DeleteRecords of the topic's partition below ``offset``
    with ``timeout_s`` as the request's ``timeout_ms``."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    (future,) = admin.delete_records([TopicPartition(TOPIC, 0, offset)], request_timeout=60,
                                     operation_timeout=timeout_s).values()
    try:
        return KafkaError.NO_ERROR, future.result(60).low_watermark
    except KafkaException as exc:
        return exc.args[0].code(), -1


def test_answered_at_the_low_watermark_and_held_back_by_a_stalled_follower(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster(overrides={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    cluster.create_topic(TOPIC, 1, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
    for i in range(10):
        producer.produce(TOPIC, value=b"%02d" % i, partition=0)
    assert producer.flush(30) == 0
    assert _delete_before(cluster.bootstrap, 4, 30) == (KafkaError.NO_ERROR, 4)

    start = cluster.partition(TOPIC)
    assert start is not None
    follower = next(r for r in start.replicas if r != start.leader)
    pid = cluster.broker(follower).pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        # Alive (its lease runs for a few seconds more) but fetching nothing: its log start
        # stays at 4, so the low watermark cannot reach 6 within the request's second.
        assert _delete_before(cluster.bootstrap, 6, 1.0) == (KafkaError.REQUEST_TIMED_OUT, -1)
        # Its lease runs out: a dead broker's replica does not count, and the controller's ISR
        # change wakes the waiting request.
        assert _delete_before(cluster.bootstrap, 6, 4 * SESSION_TIMEOUT_MS / 1000) == (
            KafkaError.NO_ERROR, 6)
        now = cluster.partition(TOPIC, via=start.leader)
        assert now is not None and follower not in now.isr
    finally:
        os.kill(pid, signal.SIGCONT)
