"""A KIP-848 consumer group when its coordinator dies (``kill -9``) in a 3-broker cluster.

The coordinator is the leader of the group's ``__consumer_offsets`` partition (replication
factor 3). When its broker is killed, another replica becomes leader, replays the group's
records (``consumer_group_records``) and coordinates: the members (confluent-kafka,
``group.protocol=consumer``, worker processes of ``workers.py``) find it and go on at their
member epochs — no callback fires, no partition moves — and no committed offset goes
backwards. The cluster comes from the cluster suite's ``cluster_on``, once on each metadata
store (SQLite and etcd), as the cluster suite runs its tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from ..cluster.cluster_processes import ClusterProcesses, cluster_on
from .kafka_ops import committed, end_offsets, produce
from .ledger import all_committed, check_processing, expected_positions
from .test_consumer_group_protocol import CONSUMER_SETTINGS
from .workers import WAIT_S, Group

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC: Final = "kip848-failover"
GROUP: Final = "kip848-failover-group"
PARTITIONS: Final = 6
RECORDS: Final = 1_200
CLUSTER_SETTINGS: Final = {k: v for k, v in CONSUMER_SETTINGS.items()
                           if k != "offsets.topic.replication.factor"}


@pytest.fixture(params=["sqlite", "etcd"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_on(str(request.param), tmp_path / "cluster", 3, CLUSTER_SETTINGS) as started:
        yield started


def test_the_group_survives_its_coordinators_death_without_a_rebalance(
        cluster: ClusterProcesses, tmp_path: Path) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    bootstrap = cluster.bootstrap
    produce(bootstrap, TOPIC, PARTITIONS, RECORDS)
    everything = {(TOPIC, p) for p in range(PARTITIONS)}
    names = ["m1", "m2"]
    with Group(bootstrap, GROUP, tmp_path) as group:
        ledger = group.ledger
        for name in names:
            group.start(name, "confluent", topics=[TOPIC], group_protocol="consumer")
        first = end_offsets(TOPIC, PARTITIONS, RECORDS)
        ledger.wait_until(lambda lg: lg.covers(names, everything)
                          and lg.unique >= expected_positions(first)
                          and all_committed(first)(lg), WAIT_S,
                          "two members to process and commit the first records")
        before = committed(bootstrap, GROUP, everything)
        assert before == first
        assignments = ledger.assignments(names)
        coordinator = cluster.admin().describe_consumer_groups([GROUP])[GROUP].result(
            timeout=10).coordinator.id
        kill_seq = ledger.seq
        cluster.broker(coordinator).kill()

        live = cluster.live_bootstrap()
        cluster.wait_for(lambda: committed(live, GROUP, everything) == before,
                         "the new coordinator serving the committed offsets", timeout=WAIT_S)
        produce(live, TOPIC, PARTITIONS, RECORDS, start=RECORDS)
        ends = end_offsets(TOPIC, PARTITIONS, 2 * RECORDS)
        group.wait_processed(ends, "the records produced after the failover")
        check_processing(ledger, ends)
        moved = [e for e in ledger.events[kill_seq:] if e.kind in ("assigned", "revoked")]
        assert moved == [], f"a rebalance after the failover: {moved}"
        assert ledger.assignments(names) == assignments
        for event in ledger.events[kill_seq:]:
            if event.kind == "commit" and event.data["ok"]:
                for t, p, offset in event.data["offsets"]:
                    assert offset >= before[(t, p)], event
        assert committed(live, GROUP, ends) == ends
        for name in names:
            group.members[name].stop()
