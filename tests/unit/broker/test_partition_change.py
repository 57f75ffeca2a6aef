"""The controller's partition rules: elections, ISR fencing, reassignment, preferred leaders."""

from __future__ import annotations

import uuid

from strata.broker.cluster.image import NO_LEADER, BrokerRegistration, PartitionRegistration
from strata.broker.cluster.partition_change import (
    controlled_shutdown,
    leave_isr_on_restart,
    reassign,
    reconcile_partition,
)

TOPIC_ID = uuid.uuid4()


def live(*ids: int, epochs: dict[int, int] | None = None) -> dict[int, BrokerRegistration]:
    epochs = epochs or {}
    return {i: BrokerRegistration(i, "127.0.0.1", 9092 + i, None, epochs.get(i, 10 + i))
            for i in ids}


def partition(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, *,
              leader_epoch: int = 3, leader_broker_epoch: int | None = None,
              **kw: object) -> PartitionRegistration:
    if leader_broker_epoch is None:
        leader_broker_epoch = 10 + leader if leader >= 0 else 0
    return PartitionRegistration(TOPIC_ID, replicas, isr, leader, leader_epoch,
                                 leader_broker_epoch, 7, **kw)  # type: ignore[arg-type]


def test_a_healthy_partition_is_left_alone() -> None:
    assert reconcile_partition(partition((0, 1, 2), (0, 1, 2), 0), live(0, 1, 2)) is None


def test_dead_leader_is_replaced_by_the_next_isr_replica_in_replica_order() -> None:
    new = reconcile_partition(partition((0, 1, 2), (2, 1, 0), 0), live(1, 2))
    assert new is not None
    assert new.leader == 1
    assert new.isr == (2, 1)
    assert new.leader_epoch == 4 and new.partition_epoch == 8
    assert new.leader_broker_epoch == 11


def test_dead_follower_leaves_the_isr_without_a_new_leader_epoch() -> None:
    new = reconcile_partition(partition((0, 1, 2), (0, 1, 2), 0), live(0, 1))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (0, (0, 1), 3, 8)


def test_restarted_leader_is_replaced_when_another_isr_member_is_live() -> None:
    # Broker 0 re-registered (epoch 99): the incarnation that led is gone.
    new = reconcile_partition(partition((0, 1), (0, 1), 0), live(0, 1, epochs={0: 99}))
    assert new is not None
    assert new.leader == 1 and new.leader_epoch == 4
    assert new.isr == (0, 1)


def test_restarted_sole_leader_leads_again_at_a_new_epoch() -> None:
    new = reconcile_partition(partition((0,), (0,), 0), live(0, epochs={0: 99}))
    assert new is not None
    assert (new.leader, new.leader_broker_epoch, new.leader_epoch) == (0, 99, 4)


def test_no_live_isr_member_takes_the_partition_offline_and_keeps_the_isr() -> None:
    new = reconcile_partition(partition((0, 1), (0,), 0), live(1))
    assert new is not None
    assert new.leader == NO_LEADER
    assert new.isr == (0,)
    # ... and it comes back when the last ISR member does.
    again = reconcile_partition(new, live(0, 1))
    assert again is not None and again.leader == 0 and again.leader_epoch == new.leader_epoch + 1


def test_unclean_election_only_when_enabled() -> None:
    p = partition((0, 1), (0,), 0)
    assert reconcile_partition(p, live(1)).leader == NO_LEADER  # type: ignore[union-attr]
    new = reconcile_partition(p, live(1), unclean=True)
    assert new is not None and new.leader == 1 and new.isr == (1,)


def test_reassignment_waits_for_the_new_replicas_then_completes() -> None:
    start = reassign(partition((0, 1), (0, 1), 0), (1, 2))
    assert start.replicas == (1, 2, 0) and start.adding == (2,) and start.removing == (0,)
    assert reconcile_partition(start, live(0, 1, 2)) is None  # 2 is not in the ISR yet
    caught_up = start.with_changes(isr=(0, 1, 2))
    done = reconcile_partition(caught_up, live(0, 1, 2))
    assert done is not None
    assert done.replicas == (1, 2) and done.isr == (1, 2)
    assert done.leader == 1 and done.leader_epoch == caught_up.leader_epoch + 1
    assert done.adding == () and done.removing == ()


def test_reassignment_to_the_same_replicas_cancels() -> None:
    start = reassign(partition((0, 1), (0, 1), 0), (1, 2))
    cancelled = reassign(start, (0, 1))
    assert cancelled.replicas == (0, 1) and cancelled.adding == () and cancelled.removing == ()


def test_preferred_leader_election() -> None:
    p = partition((0, 1, 2), (0, 1, 2), 1)
    assert reconcile_partition(p, live(0, 1, 2)) is None
    new = reconcile_partition(p, live(0, 1, 2), preferred=True)
    assert new is not None and new.leader == 0 and new.leader_epoch == 4
    # Not in the ISR: no move.
    assert reconcile_partition(partition((0, 1, 2), (1, 2), 1), live(0, 1, 2),
                               preferred=True) is None


def test_controlled_shutdown_hands_leadership_to_a_live_isr_member() -> None:
    new = controlled_shutdown(partition((0, 1, 2), (0, 1, 2), 0), 0, live(0, 1, 2))
    assert new is not None and new.leader == 1 and new.isr == (1, 2)
    assert controlled_shutdown(partition((0, 1), (0,), 0), 0, live(0, 1)) is None
    assert controlled_shutdown(partition((0, 1), (0, 1), 1), 0, live(0, 1)) is None


def test_brokers_shutting_down_are_live_but_never_elected() -> None:
    p = partition((0, 1, 2), (0, 1, 2), 0)
    assert reconcile_partition(p, live(0, 1, 2), shutting_down=frozenset({1})) is None
    new = reconcile_partition(p, live(1, 2), shutting_down=frozenset({1}))
    assert new is not None and new.leader == 2 and new.isr == (1, 2)


def test_a_restarting_follower_leaves_the_isr() -> None:
    new = leave_isr_on_restart(partition((0, 1, 2), (0, 1, 2), 0), 2)
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (0, (0, 1), 3, 8)


def test_a_restarting_leader_leaves_the_isr_and_the_leadership() -> None:
    new = leave_isr_on_restart(partition((0, 1, 2), (0, 1, 2), 0), 0)
    assert new is not None
    assert (new.leader, new.isr, new.leader_broker_epoch) == (NO_LEADER, (1, 2), 0)
    assert new.leader_epoch == 4  # the old incarnation's epoch is over
    # the controller then elects an in-sync replica, never the restarted broker
    elected = reconcile_partition(new, live(0, 1, 2, epochs={0: 99}))
    assert elected is not None and elected.leader == 1 and elected.leader_epoch == 5


def test_the_last_isr_member_stays_when_it_restarts() -> None:
    assert leave_isr_on_restart(partition((0, 1, 2), (1,), 1), 1) is None
    assert leave_isr_on_restart(partition((0, 1, 2), (1,), NO_LEADER), 1) is None


def test_a_restarting_broker_outside_the_isr_changes_nothing() -> None:
    assert leave_isr_on_restart(partition((0, 1, 2), (0, 1), 0), 2) is None


def test_all_brokers_restarting_leave_exactly_one_isr_member() -> None:
    p = partition((0, 1, 2), (0, 1, 2), 0)
    for restarting in (2, 0, 1):
        p = leave_isr_on_restart(p, restarting) or p
    assert p.isr == (1,) and p.leader == NO_LEADER
    elected = reconcile_partition(p, live(0, 1, 2, epochs={0: 99, 1: 98, 2: 97}))
    assert elected is not None and elected.leader == 1 and elected.isr == (1,)
