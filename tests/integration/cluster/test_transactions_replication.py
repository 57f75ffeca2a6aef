"""Transactions across replicas: followers copy transactional batches and markers (their
producer state and ``.txnindex`` follow), so after the leader is killed the new leader answers
read_committed exactly as the old one did — same LSO, same aborted transactions skipped — and
accepts the marker that ends the transaction still open at the failover.

The markers are written by hand with no transaction coordinator behind the producer ids, so
KIP-890's verification (which would ask that coordinator) is off here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ..clients.test_read_committed import consume, consumer, end_txn, latest, produce
from ..clients.wire import KafkaWire
from .cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "txn.replicated"
ABORTED, COMMITTED, OPEN = 920_001, 920_002, 920_003


@pytest.mark.parametrize("backend", ["sqlite"])
def test_new_leader_answers_the_same_read_committed_data(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster(overrides={"transaction.partition.verification.enable": "false"})
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    first = cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                             and len(p.isr) == 3 and p, "a full ISR")
    leader = cluster.broker(first.leader)
    with KafkaWire.to(leader.bootstrap, timeout=15) as wire:
        produce(wire, TOPIC, b"a1", producer_id=ABORTED)
        produce(wire, TOPIC, b"p1")
        produce(wire, TOPIC, b"c1", producer_id=COMMITTED)
        end_txn(wire, TOPIC, ABORTED, commit=False)
        end_txn(wire, TOPIC, COMMITTED, commit=True)
        open_first = produce(wire, TOPIC, b"o1", producer_id=OPEN)
        produce(wire, TOPIC, b"p2")
        assert latest(wire, TOPIC, 1) == open_first
    leader.kill()
    after = cluster.wait_for(lambda: (p := cluster.partition(TOPIC)) is not None
                             and p.leader not in (first.leader, -1) and p,
                             "a new leader after the kill")
    new_leader = cluster.broker(after.leader)
    with KafkaWire.to(new_leader.bootstrap, timeout=15) as wire:
        # the new leader's HW reaches its log end with the next follower fetch
        cluster.wait_for(lambda: latest(wire, TOPIC, 0) == open_first + 2, "the HW caught up")
        assert latest(wire, TOPIC, 1) == open_first  # the same LSO
        committed = consumer(new_leader, TOPIC, "read_committed")
        try:
            assert consume(committed, 2, 20) == [b"p1", b"c1"]
            assert consume(committed, 1, 1.5) == []
            end_txn(wire, TOPIC, OPEN, commit=True)
            assert consume(committed, 2, 20) == [b"o1", b"p2"]
        finally:
            committed.close()
