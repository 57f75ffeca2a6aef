"""The campaign's group consumer (``strata.cli.chaos_workload.GroupConsumer``) keeps, per
partition, the latest commit the coordinator acknowledged — not the highest: commits are
last-writer-wins (Kafka's and Strata's coordinators alike), and librdkafka may send an older
position's commit after a newer one (seed 1148: four queued async commits sent at once after a
coordinator move, each acknowledged in turn). A resume at the commit in force is then no
regression; one below it still is."""

from __future__ import annotations

import logging

from confluent_kafka import TopicPartition

from strata.cli.chaos_checker import Resume, find_commit_regressions
from strata.cli.chaos_workload import GroupConsumer


def consumer() -> GroupConsumer:
    return GroupConsumer("127.0.0.1:1", "chaos", "chaos-group", 60.0,
                         logging.getLogger("test"))


def test_the_latest_acknowledged_commit_is_the_one_in_force() -> None:
    member = consumer()
    member._acknowledge([TopicPartition("chaos", 5, 6893), TopicPartition("chaos", 1, 6896)])
    member._acknowledge([TopicPartition("chaos", 5, 6891), TopicPartition("chaos", 1, 6894)])
    member._acknowledge([TopicPartition("chaos", 5, 6892)])
    assert member.acknowledged == {5: 6892, 1: 6894}
    member._on_assign(None, [TopicPartition("chaos", 5), TopicPartition("chaos", 1)])
    member._consumed(5, 6892, b"a")  # resumed at the commit written last
    member._consumed(1, 6893, b"b")  # below it: taken back
    assert find_commit_regressions(member.resumes) == [Resume(1, 6893, 6894)]


def test_a_commit_without_an_offset_changes_nothing() -> None:
    member = consumer()
    member._acknowledge([TopicPartition("chaos", 0, 10)])
    member._acknowledge([TopicPartition("chaos", 0, -1001)])  # OFFSET_INVALID: nothing stored
    assert member.acknowledged == {0: 10}
