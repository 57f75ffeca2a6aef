"""The controller: failover, elections after it, partition reassignment, preferred leaders,
controlled shutdown, zombie fencing and topic ids."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from strata.broker.cluster.metadata_publisher import read_partition_topic_id

from ..broker_process import BrokerProcess
from .cluster_processes import BackgroundProducer, ClusterProcesses, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The faults run on both backends; these broker-side rules do not depend on the store.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])


def test_controller_killed_another_takes_over_and_elects(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic("events", 3, 3)
    old = cluster.controller()
    assert old >= 0
    cluster.broker(old).kill()
    new = cluster.wait_for(lambda: (c := cluster.controller()) not in (-1, old) and c + 1,
                           "a new controller") - 1
    # The new controller elects leaders for what the old one led, and for the next death too.
    cluster.wait_for(lambda: all((p := cluster.partition("events", i)) is not None
                                 and p.leader not in (-1, old) for i in range(3)),
                     "every partition led by a live broker")
    other = next(b for b in range(3) if b not in (old, new))
    victim = next(i for i in range(3)
                  if (p := cluster.partition("events", i)) is not None and p.leader == other)
    cluster.broker(other).kill()
    cluster.wait_for(lambda: (p := cluster.partition("events", victim)) is not None
                     and p.leader == new, f"partition {victim} re-elected onto broker {new}")


def test_reassignment_onto_a_new_broker_under_load(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic("moving", assignment=[[0, 1]])
    cluster.add_broker(3)
    cluster.wait_for(lambda: len(cluster.metadata().brokers) == 4, "broker 3 registered")
    with BackgroundProducer(cluster.bootstrap, "moving", {"acks": "all",
                                                          "enable.idempotence": True}) as prod:
        cluster.wait_for(lambda: prod.acked.count() >= 2000, "records acknowledged")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
        try:
            admin.alter_partition_reassignments({TopicPartition("moving", 0): [1, 3]})
            cluster.wait_for(lambda: (p := cluster.partition("moving")) is not None
                             and p.replicas == (1, 3) and set(p.isr) == {1, 3},
                             "partition moved to brokers 1 and 3")
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        at_move = prod.acked.count()
        cluster.wait_for(lambda: prod.acked.count() >= at_move + 1000, "writes after the move")
        acked = prod.stop()
    assert not acked.errors
    # Broker 0 no longer holds the partition; broker 3 has every acknowledged record.
    cluster.wait_for(lambda: not (cluster.broker(0).data_dir / "moving-0").exists(),
                     "the replica removed from broker 0")
    for node in (0, 1):
        cluster.broker(node).kill()
    cluster.wait_for(lambda: (p := cluster.partition("moving")) is not None and p.leader == 3,
                     "broker 3 leads")
    log = dict(read_all(cluster.live_bootstrap(), "moving", 1, len(acked.records))[0])
    assert all(log.get(o) == v for (_, o), v in acked.records.items())


@SQLITE_ONLY
def test_preferred_leader_election_and_controlled_shutdown(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    cluster = make_cluster()
    cluster.create_topic("prefs", assignment=[[0, 1, 2]])
    with BackgroundProducer(cluster.bootstrap, "prefs", {"acks": "all",
                                                         "enable.idempotence": True}) as prod:
        cluster.wait_for(lambda: prod.acked.count() >= 1000, "records acknowledged")
        # SIGTERM: leadership moves before the broker exits (controlled shutdown).
        assert cluster.broker(0).stop() == 0
        moved = cluster.partition("prefs")
        assert moved is not None and moved.leader in (1, 2)
        cluster.broker(0).start()
        cluster.wait_for(lambda: (p := cluster.partition("prefs")) is not None
                         and 0 in p.isr, "broker 0 back in the ISR")
        futures = cluster.admin().elect_leaders(ElectionType.PREFERRED,
                                                [ConfluentTopicPartition("prefs", 0)])
        results = futures.result(timeout=30)
        assert results[ConfluentTopicPartition("prefs", 0)] is None
        cluster.wait_for(lambda: (p := cluster.partition("prefs")) is not None
                         and p.leader == 0, "the preferred replica leads again")
        at = prod.acked.count()
        cluster.wait_for(lambda: prod.acked.count() >= at + 500, "writes after the election")
        acked = prod.stop()
    assert not acked.errors, acked.errors[:3]


@SQLITE_ONLY
def test_a_zombie_with_a_reused_node_id_is_fenced(
        make_cluster: Callable[..., ClusterProcesses], tmp_path_factory: pytest.TempPathFactory
) -> None:
    cluster = make_cluster()
    from ..broker_process import BrokerProcess

    original = cluster.broker(2)
    twin = BrokerProcess(tmp_path_factory.mktemp("twin"), {
        k: v for k, v in original.config.items()
        if k not in ("listeners", "advertised.listeners", "log.dirs", "http.port")})
    twin.start()
    try:
        # The older incarnation sees node.id 2 registered at a newer epoch and stops.
        cluster.wait_for(lambda: not original.is_running(), "the older broker 2 to stop")
        cluster.wait_for(lambda: any(b.port == twin.port
                                     for b in cluster.metadata().brokers.values()),
                         "broker 2 advertised at the new process's address")
    finally:
        twin.kill()


def log_end_offset(broker: BrokerProcess, topic: str, partition: int) -> float | None:
    """The broker's ``strata_log_end_offset`` of one partition (None: not hosted)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics",
                                timeout=5) as response:
        text = response.read().decode()
    wanted = f'strata_log_end_offset{{partition="{partition}",topic="{topic}"}} '
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    return None


@SQLITE_ONLY
def test_a_recreated_topic_never_serves_the_old_data(
        make_cluster: Callable[..., ClusterProcesses]) -> None:
    # A long session: the stopped broker stays registered, so the new topic can name it.
    cluster = make_cluster(overrides={"broker.session.timeout.ms": "60000"})
    cluster.create_topic("again", assignment=[[0, 1, 2]])
    with BackgroundProducer(cluster.bootstrap, "again", {"acks": "all"}) as prod:
        cluster.wait_for(lambda: prod.acked.count() >= 100, "old records")
        acked = prod.stop()
    controller = cluster.controller()
    away = next(b for b in (2, 1, 0) if b != controller)  # DeleteTopics goes to the controller
    broker = cluster.broker(away)
    cluster.wait_for(lambda: (log_end_offset(broker, "again", 0) or 0) >= len(acked.records),
                     f"broker {away} has the old records")
    old_id = read_partition_topic_id(broker.data_dir / "again-0")
    assert old_id is not None
    broker.kill()  # away while the topic is deleted and created again
    cluster.admin().delete_topics(["again"])["again"].result(timeout=30)
    cluster.wait_for(lambda: cluster.partition("again") is None, "the topic gone")
    cluster.create_topic("again", assignment=[[0, 1, 2]])
    assert (broker.data_dir / "again-0").exists()  # it still has the old topic's log
    broker.start()
    cluster.wait_for(lambda: (p := cluster.partition("again")) is not None and away in p.isr,
                     f"broker {away} in the new topic's ISR")
    # Its replica is the new topic's (empty), not the old one's records: the old log was
    # deleted for its topic id, not merely truncated by the follower's KIP-101 rounds.
    cluster.wait_for(lambda: log_end_offset(broker, "again", 0) == 0,
                     f"broker {away} hosting the new, empty partition")
    new_id = read_partition_topic_id(broker.data_dir / "again-0")
    assert new_id is not None and new_id != old_id
    assert "deleted and recreated while this broker was away" in broker.log_tail(200)
    assert read_all(cluster.live_bootstrap(), "again", 1, 0, timeout=10) == {0: []}
