"""Which replication throttles a batch of reassignments needs (``throttle.py``): as
kafka-reassign-partitions --throttle sets them."""

from __future__ import annotations

from strata.operator.throttle import ThrottlePlan, plan_throttles
from strata.operator.topic_sync import ObservedTopic, decide


def test_existing_replicas_on_the_leader_side_new_ones_on_the_follower_side() -> None:
    current = {("a", 0): (0, 1), ("a", 1): (1, 2), ("b", 0): (2, 0), ("c", 0): (0, 1)}
    targets = {("a", 0): (0, 3), ("a", 1): (1, 2), ("b", 0): (3, 0, 1), ("c", 0): (0, 1)}
    plan = plan_throttles(current, targets, 1_048_576)
    assert dict(plan.topics) == {
        "a": {"leader.replication.throttled.replicas": "0:0,0:1",
              "follower.replication.throttled.replicas": "0:3"},
        "b": {"leader.replication.throttled.replicas": "0:0,0:2",
              "follower.replication.throttled.replicas": "0:1,0:3"},
    }  # a-1 and c-0 do not move: not throttled
    assert plan.brokers == (0, 1, 2, 3)
    assert plan.broker_configs() == {"leader.replication.throttled.rate": "1048576",
                                     "follower.replication.throttled.rate": "1048576"}


def test_a_reorder_throttles_the_leader_side_only_and_no_rate_means_no_plan() -> None:
    plan = plan_throttles({("t", 0): (0, 1)}, {("t", 0): (1, 0)}, 10)
    assert plan.topics["t"]["follower.replication.throttled.replicas"] == ""
    assert plan_throttles({("t", 0): (0, 1)}, {("t", 0): (2, 1)}, 0).empty


def test_a_plan_round_trips_through_the_status() -> None:
    plan = plan_throttles({("t", 0): (0, 1)}, {("t", 0): (0, 2)}, 5_000)
    assert ThrottlePlan.from_status(plan.to_status()) == plan
    assert ThrottlePlan.from_status(None).empty


def test_a_topics_drift_revert_leaves_the_operators_throttles_alone() -> None:
    observed = ObservedTopic(3, {"retention.ms": "1",
                                 "leader.replication.throttled.replicas": "0:0",
                                 "follower.replication.throttled.replicas": "0:2"})
    assert decide(3, {}, observed).delete_config == ("retention.ms",)
