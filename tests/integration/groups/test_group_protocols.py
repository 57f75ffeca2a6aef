"""librdkafka's incremental rebalancing (cooperative-sticky) and static membership (KIP-345).

Both with confluent-kafka members as processes (``workers.py``). Incremental: when a member
joins or leaves, the members that keep partitions are never asked to give them up; only the
partitions that move are revoked. Static: a member with a ``group.instance.id`` that dies and
comes back within the session timeout gets its old partitions back and nobody else rebalances.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..broker_process import BrokerProcess
from .kafka_ops import committed, end_offsets, fresh_topic, produce
from .ledger import Ledger, check_processing
from .workers import WAIT_S, WORK_MS, Group

pytestmark = pytest.mark.integration

PARTITIONS = 6


def events_after(ledger: Ledger, seq: int, worker: str, kind: str) -> list[list[list[object]]]:
    return [e.data["tps"] for e in ledger.events[seq:] if e.worker == worker and e.kind == kind]


def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = group_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "coop", PARTITIONS, 9_000)
    spec = {"topics": [topic], "assignor": "cooperative-sticky", "work_ms": WORK_MS}
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        first = ["m1", "m2", "m3"]
        group.start_sharing(first, "confluent", everything, **spec)
        before = ledger.assignments(first)
        joined_at = ledger.seq

        group.start("m4", "confluent", **spec)
        four = [*first, "m4"]
        ledger.wait_until(lambda lg: lg.covers(four, everything), WAIT_S,
                          "the fourth member to get partitions")
        after = ledger.assignments(four)
        for member in first:
            assert after[member] <= before[member], (
                f"{member} was given partitions it did not own: a sticky assignor only takes away"
                f" ({before[member]} -> {after[member]})"
            )
            revoked = {(t, p) for tps in events_after(ledger, joined_at, member, "revoked")
                       for t, p in tps}
            assert revoked == before[member] - after[member], (
                f"{member} had {revoked} revoked; only what moved to m4 "
                f"({before[member] - after[member]}) should be"
            )
        assert len(after["m4"]) == 1 or len(after["m4"]) == 2, after

        left_at = ledger.seq
        group.members["m1"].stop()
        rest = ["m2", "m3", "m4"]
        ledger.wait_until(lambda lg: lg.covers(rest, everything), WAIT_S,
                          "m1's partitions to be handed out")
        for member in rest:
            assert not events_after(ledger, left_at, member, "revoked"), (
                f"{member} had partitions revoked when m1 left: incremental rebalancing only adds"
            )
        produce(bootstrap, topic, PARTITIONS, 3_000, start=9_000)
        ends = end_offsets(topic, PARTITIONS, 12_000)
        group.wait_processed(ends, "all 12,000 records processed")
        check_processing(ledger, ends)
        assert committed(bootstrap, group_id, ends) == ends
        for member in rest:
            group.members[member].stop()


def test_static_member_rejoins_within_session_timeout_without_rebalance(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = group_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "static", PARTITIONS, 3_000)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        members = ["m1", "m2", "m3"]
        for i, member in enumerate(members, 1):
            group.start(member, "confluent", topics=[topic], group_instance_id=f"instance-{i}")
        ledger.wait_until(lambda lg: lg.covers(members, everything), WAIT_S,
                          "three static members to share the six partitions")
        ledger.wait_until(lambda lg: len(lg.unique) >= 3_000, WAIT_S, "3,000 records processed")
        before = ledger.assignments(members)
        crashed_at = ledger.seq

        group.members["m1"].kill()  # no LeaveGroup: the coordinator keeps instance-1's place
        group.start("m1-again", "confluent", topics=[topic], group_instance_id="instance-1")
        ledger.wait_until(lambda lg: bool(lg.views["m1-again"].assignment), WAIT_S,
                          "instance-1 to get its partitions back")
        assert ledger.assignments(["m1-again"])["m1-again"] == before["m1"]
        produce(bootstrap, topic, PARTITIONS, 3_000, start=3_000)
        ends = end_offsets(topic, PARTITIONS, 6_000)
        group.wait_processed(ends, "all 6,000 records processed")
        for member in ("m2", "m3"):
            moves = [e.data for e in ledger.events[crashed_at:]
                     if e.worker == member and e.kind in ("assigned", "revoked")]
            assert not moves, f"{member} rebalanced when a static member came back: {moves}"
        check_processing(ledger, ends)
        assert committed(bootstrap, group_id, ends) == ends
        for member in ("m1-again", "m2", "m3"):
            group.members[member].stop()
