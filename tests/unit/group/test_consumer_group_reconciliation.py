"""Property: over random join / heartbeat / leave / crash / expire sequences, no partition is
ever consumed by two members at once, and a quiet group converges to a complete assignment."""

from __future__ import annotations

import uuid

from hypothesis import example, given, settings
from hypothesis import strategies as st

from strata.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
)
from strata.protocol.error_codes import ErrorCode
from tests.unit.group.consumer_group_sim import Client

SESSION_MS = 45_000
ACTIONS = st.lists(st.tuples(st.sampled_from(["join", "join", "beat", "beat", "beat", "beat",
                                              "leave", "crash", "static-leave", "expire"]),
                             st.integers(min_value=0, max_value=2)),
                   min_size=1, max_size=80)


@settings(max_examples=500, deadline=None)
@given(ACTIONS, st.sampled_from(["uniform", "range"]))
@example([("join", 0), ("join", 1), ("beat", 0), ("beat", 1), ("beat", 1), ("beat", 0)],
         "uniform")  # m1 must not get m0's partitions before m0 has revoked them
def test_no_partition_is_held_by_two_members(actions: list[tuple[str, int]],
                                             assignor: str) -> None:
    membership = ConsumerGroupMembership(ConsumerGroupConfig(assignors=(assignor,)))
    group = ConsumerGroup("g")
    clients = [Client(f"m{i}", f"i{i}" if i % 2 else None) for i in range(5)]
    alive = [False] * 5
    now = 0.0
    incarnation = [0] * 5
    for action, i in actions:
        now += 1000
        client = clients[i]
        if action == "join" and not alive[i]:
            incarnation[i] += 1
            client.member_id = f"m{i}.{incarnation[i]}"
            alive[i] = client.heartbeat(membership, group, now).error == ErrorCode.none
        elif action == "beat" and alive[i]:
            result = client.heartbeat(membership, group, now)
            if result.error != ErrorCode.none:  # fenced: it drops everything, rejoins later
                client.stop()
                alive[i] = False
        elif action in ("leave", "static-leave") and alive[i]:
            static = action == "static-leave" and client.instance_id is not None
            client.leave(membership, group, epoch=-2 if static else -1)
            alive[i] = False
        elif action == "crash" and alive[i]:  # stops consuming, the session runs out
            client.stop()
            alive[i] = False
        elif action == "expire":
            now += SESSION_MS
            for j, c in enumerate(clients):  # survivors heartbeat in time, except i
                if alive[j] and j != i:
                    c.heartbeat(membership, group, now - 1)
            for member_id in membership.expire_due(group, now):
                for j, c in enumerate(clients):
                    if c.member_id == member_id and alive[j]:
                        c.stop()
                        alive[j] = False
        _assert_disjoint(clients)
    # Quiet period: the live members heartbeat until the group is stable; all is assigned.
    for _ in range(10):
        now += 1000
        membership.expire_due(group, now - SESSION_MS + 2000)  # crashed ones go
        for j, c in enumerate(clients):
            if alive[j]:
                c.heartbeat(membership, group, now)
        _assert_disjoint(clients)
    live = [c for j, c in enumerate(clients) if alive[j]]
    if live and all(m.member_epoch >= 0 for m in group.members.values()) and \
            len(group.members) == len(live):
        assert group.state is ConsumerGroupState.STABLE
        assert sum(len(c.held) for c in live) == 12


def _assert_disjoint(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for c in clients:
        for tp in c.held:
            assert tp not in seen, f"{tp} held by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id
