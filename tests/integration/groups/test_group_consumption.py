"""Consumer groups with real clients as separate processes: sharing, rebalancing, failures.

Every client (confluent-kafka, kafka-python, aiokafka, kafkajs) runs as its own member processes
(``workers.py``); each member commits after processing each batch, so the delivery rule of
``ledger.check_processing`` holds: every record processed, and none processed again after a
successful commit covered it. Members use the clients' default eager assignors (range for the
Java-style clients and librdkafka, kafkajs's round robin); ``test_group_protocols.py`` covers
cooperative-sticky and static membership.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ..broker_process import BrokerProcess
from .kafka_ops import committed, create_topic, end_offsets, fresh_topic, produce
from .ledger import check_processing, first_offsets_after
from .workers import CLIENTS, WAIT_S, WORK_MS, Group

pytestmark = pytest.mark.integration

PARTITIONS = 6


def name(label: str, client: str) -> str:
    return f"{label}-{client}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_exactly_once_across_join_and_leave(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    """Three members share six partitions; a fourth joins mid-stream and one leaves: 30,000
    records, each processed once (redeliveries only where a commit failed)."""
    bootstrap = group_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, f"share-{client}", PARTITIONS, 15_000)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        first = ["m1", "m2", "m3"]
        group.start_sharing(first, client, everything, topics=[topic], work_ms=WORK_MS)
        ledger.wait_until(lambda lg: len(lg.unique) >= 5_000, WAIT_S, "5,000 records processed")

        group.start("m4", client, topics=[topic], work_ms=WORK_MS)
        produce(bootstrap, topic, PARTITIONS, 15_000, start=15_000)
        four = [*first, "m4"]
        ledger.wait_until(lambda lg: lg.covers(four, everything), WAIT_S,
                          "a rebalance giving the fourth member partitions")
        ledger.wait_until(lambda lg: len(lg.unique) >= 20_000, WAIT_S,
                          "20,000 records processed")

        group.members["m1"].stop()
        rest = ["m2", "m3", "m4"]
        ends = end_offsets(topic, PARTITIONS, 30_000)
        ledger.wait_until(lambda lg: lg.covers(rest, everything), WAIT_S,
                          "a rebalance after m1 left")
        group.wait_processed(ends, "all 30,000 records processed")
        check_processing(ledger, ends)
        assert committed(bootstrap, group_id, ends) == ends
        assert ledger.views["m1"].closed, "m1 did not close cleanly"
        for member in rest:
            group.members[member].stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_killed_member_partitions_move_and_resume_from_its_commits(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    """``kill -9`` one of three members: after the session timeout its partitions go to the
    others, who start each one exactly at the offset it last committed."""
    bootstrap = group_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, f"kill-{client}", PARTITIONS, 6_000)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        members = ["m1", "m2", "m3"]
        group.start_sharing(members, client, everything, topics=[topic])
        ledger.wait_until(lambda lg: len(lg.unique) >= 6_000, WAIT_S,
                          "the first 6,000 records processed")

        orphans = ledger.assignments(["m1"])["m1"]
        group.members["m1"].kill()
        kill_seq = ledger.seq
        # What m1 committed last, as the coordinator has it (a commit m1 sent just before it
        # died counts even if m1 never printed the answer).
        resume_at = {tp: max(offset, 0)
                     for tp, offset in committed(bootstrap, group_id, orphans).items()}
        produce(bootstrap, topic, PARTITIONS, 6_000, start=6_000)
        survivors = ["m2", "m3"]
        ends = end_offsets(topic, PARTITIONS, 12_000)
        ledger.wait_until(lambda lg: lg.covers(survivors, everything), WAIT_S,
                          "m1's partitions to move after its session timed out")
        group.wait_processed(ends, "all 12,000 records processed")
        resumed = first_offsets_after(ledger, kill_seq, orphans, exclude="m1")
        assert resumed == resume_at, (
            f"where the new owners started m1's partitions {resumed} vs m1's last commits "
            f"{resume_at}"
        )
        check_processing(ledger, ends)
        assert committed(bootstrap, group_id, ends) == ends
        for member in survivors:
            group.members[member].stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_pattern_subscription_picks_up_new_matching_topics(
    make_group_broker: Callable[[], BrokerProcess], client: str, tmp_path: Path
) -> None:
    """``^orders-.*``: matching topics are consumed, others never; a matching topic created
    after the member subscribed is picked up by its next metadata refresh. kafkajs resolves a
    pattern only when it subscribes (its documented behaviour), so there the new topic is
    picked up by a member that subscribes after it exists."""
    broker = make_group_broker()  # a namespace of its own: the pattern sees every topic
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "orders-eu", 3)
    create_topic(bootstrap, "payments-eu", 3)
    produce(bootstrap, "orders-eu", 3, 300)
    produce(bootstrap, "payments-eu", 3, 300)
    group_id = name("pattern-group", client)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        group.start("m1", client, pattern="^orders-.*")
        eu = end_offsets("orders-eu", 3, 300)
        group.wait_processed(eu, "orders-eu consumed")

        create_topic(bootstrap, "orders-us", 2)
        produce(bootstrap, "orders-us", 2, 200)
        both = {**eu, **end_offsets("orders-us", 2, 200)}
        if client == "kafkajs":
            group.members["m1"].stop()
            group.start("m2", client, pattern="^orders-.*")
        group.wait_processed(both, "orders-us picked up and consumed")
        assert {t for t, _, _ in ledger.unique} == {"orders-eu", "orders-us"}
        check_processing(ledger, both)
        assert committed(bootstrap, group_id, both) == both
        for member in group.members.values():
            if member.process.poll() is None:
                member.stop()
