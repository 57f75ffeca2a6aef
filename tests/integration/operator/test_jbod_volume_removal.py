"""Removing a JBOD volume, the Kafka side, against three real brokers with two ``log.dirs``
each (``a`` and ``b``): the operator's drain passes (``volume_removal.drain``: DescribeLogDirs
on every broker, AlterReplicaLogDirs batches to the other dir) empty every ``b`` while an
acks=all producer keeps writing; every acknowledged record is read back, in order. The
StatefulSet's re-creation and the roll are the kmock side (``test_operator_jbod.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strata.operator import log_dirs, volume_removal

from ..cluster.cluster_processes import BackgroundProducer, ClusterProcesses, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "on-two-disks"
PARTITIONS = 6


@pytest.fixture(scope="module")
def two_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    workdir = tmp_path_factory.mktemp("jbod-cluster")
    cluster = ClusterProcesses(workdir, f"sqlite:///{workdir / 'meta.db'}", 3)
    for broker in cluster.brokers:
        broker.config["log.dirs"] = f"{broker.data_dir}/a,{broker.data_dir}/b"
    try:
        cluster.start()
        yield cluster
    finally:
        for broker in cluster.brokers:
            broker.kill()


def in_dir(cluster: ClusterProcesses, name: str) -> dict[int, set[tuple[str, int]]]:
    """broker -> replicas (current or future) in its dir ``name``, by DescribeLogDirs."""
    addresses = log_dirs.brokers(cluster.bootstrap, 5.0)
    out = {}
    for node, address in addresses.items():
        described = log_dirs.describe(address, 5.0)
        path = str((cluster.broker(node).data_dir / name).resolve())
        out[node] = set(described.current[path]) | set(described.future[path])
    return out


def test_every_replica_leaves_the_removed_dir_while_a_producer_writes(
        two_dirs: ClusterProcesses) -> None:
    two_dirs.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    before = in_dir(two_dirs, "b")
    assert all(before.values()), before  # new replicas spread over both dirs (fewest first)
    leaving = [str((b.data_dir / "b").resolve()) for b in two_dirs.brokers]
    with BackgroundProducer(two_dirs.bootstrap, TOPIC,
                            {"acks": "all", "enable.idempotence": True}) as producer:
        two_dirs.wait_for(lambda: producer.acked.count() >= 2000, "records acknowledged")
        outcomes: list[volume_removal.DrainOutcome] = []

        def drain_pass() -> bool:  # what each operator pass does
            outcome = volume_removal.drain(two_dirs.bootstrap, leaving, [0, 1, 2], 5.0,
                                           batch_size=2)
            outcomes.append(outcome)
            assert outcome.reason in (volume_removal.MOVING_REPLICAS,
                                      volume_removal.VOLUMES_REMOVED), outcome
            return outcome.drained

        two_dirs.wait_for(drain_pass, "every b dir empty", timeout=60)
        # One batch in flight per broker: at most 2 moves started per broker and pass.
        assert max(o.moved for o in outcomes) <= 6 and len(outcomes) > 2
        assert sum(o.moved for o in outcomes) == sum(len(r) for r in before.values())
        moved_at = producer.acked.count()
        two_dirs.wait_for(lambda: producer.acked.count() > moved_at + 100, "appends after it")
        acked = producer.stop()
    assert in_dir(two_dirs, "b") == {0: set(), 1: set(), 2: set()}
    assert all(len(r) == PARTITIONS for r in in_dir(two_dirs, "a").values())
    assert not acked.errors, acked.errors[:5]
    for partition in range(PARTITIONS):
        offsets = sorted(o for (p, o) in acked.records if p == partition)
        assert offsets == list(range(len(offsets))), f"an acknowledged offset of {partition}"
    total = len(acked.records)
    consumed = read_all(two_dirs.bootstrap, TOPIC, PARTITIONS, total)
    assert {(p, o): v for p, rows in consumed.items() for o, v in rows} == acked.records
