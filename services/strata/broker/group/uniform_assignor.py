"""``uniform``: the default server-side assignor (KIP-848), balanced and sticky.

Kafka's ``UniformAssignor`` (its homogeneous and heterogeneous builders, here one algorithm).
Rules, in order:

1. *Sticky*: every member keeps the partitions of its current target assignment that still
   exist and that it still subscribes to (a partition claimed twice stays with the member
   first by id), up to the balanced quota with identical subscriptions;
2. *Complete*: every other partition goes to the least loaded member subscribed to its topic
   (partitions with the fewest possible owners first; ties by member id);
3. *Balanced*: while some member holds at least two partitions more than a member that could
   take one of them, one such partition moves from the most loaded member to the least loaded
   eligible one. With identical subscriptions every member ends within one partition of the
   others; with different subscriptions no single move improves the spread. Each move lowers
   the sum of squared loads, so this terminates.

*Rack-aware* when members send their rack and the partitions' replica racks are known
(``partition_assignor.rack_aware``): in step 1 a member over its quota keeps the partitions
on its rack first; in step 2 a partition goes first to the least loaded
member on one of its replicas' racks while that member is below the balanced quota (identical
subscriptions: ``ceil(partitions / members)``), the rest as above; in step 3 a member gives
away first the partitions not on its rack, preferably to a member on theirs. Stickiness and
balance come first: a member keeps what it had even off its rack, and the ±1 spread holds.
(Kafka 3.7's server-side uniform assignor was rack-aware the same way; Kafka 3.8 removed it,
KAFKA-16694, pending a new design.)

Deterministic: the answer depends only on its inputs (members by id, partitions by topic name
and index).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from typing import Final

from strata.broker.group.consumer_group_member import Assignment, assignment_of
from strata.broker.group.partition_assignor import (
    MemberSubscription,
    TopicMetadata,
    rack_aware,
    rack_matches,
    sorted_partitions,
)

UNIFORM_ASSIGNOR_NAME: Final = "uniform"


class UniformAssignor:
    """See the module docstring."""

    name: Final = UNIFORM_ASSIGNOR_NAME

    def assign(self, members: Mapping[str, MemberSubscription],
               topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]:
        ids = sorted(members)
        owner: dict[tuple[uuid.UUID, int], str] = {}
        held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in ids}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in ids:
            for topic_id in members[member_id].subscribed_topic_ids:
                if topic_id in topics:
                    subscribers.setdefault(topic_id, []).append(member_id)
        cap = _homogeneous_quota(members, topics)
        aware = rack_aware(members, topics)

        def on_rack(member_id: str, tp: tuple[uuid.UUID, int]) -> bool:
            return aware and rack_matches(members[member_id], topics[tp[0]], tp[1])

        def least_loaded(tp: tuple[uuid.UUID, int]) -> str:
            """The least loaded member that may take ``tp`` (on its rack, on a tie)."""
            return min(subscribers[tp[0]], key=lambda m: (len(held[m]), not on_rack(m, tp), m))

        def kept_first(member_id: str) -> list[tuple[uuid.UUID, int]]:
            """What the member had and may keep, those on its rack first."""
            spec = members[member_id]
            return sorted(
                ((t, p) for t, parts in spec.assigned.items() for p in parts
                 if t in topics and t in spec.subscribed_topic_ids
                 and p < topics[t].num_partitions),
                key=lambda tp: (not on_rack(member_id, tp), str(tp[0]), tp[1]))

        for member_id in ids:  # 1. sticky (on its rack first, when it may not keep all)
            for tp in kept_first(member_id):
                if tp not in owner and len(held[member_id]) < cap:
                    owner[tp] = member_id
                    held[member_id].append(tp)
        unassigned = [tp for tp in sorted_partitions(topics, subscribers) if tp not in owner]
        unassigned.sort(key=lambda tp: len(subscribers[tp[0]]))  # stable: keeps name order
        if aware:  # 2a. complete on the partitions' racks, up to the quota
            for tp in list(unassigned):
                local = [m for m in subscribers[tp[0]] if on_rack(m, tp) and len(held[m]) < cap]
                if local:
                    member_id = min(local, key=lambda m: (len(held[m]), m))
                    owner[tp] = member_id
                    held[member_id].append(tp)
            unassigned = [tp for tp in unassigned if tp not in owner]
        for tp in unassigned:  # 2. complete
            member_id = least_loaded(tp)
            owner[tp] = member_id
            held[member_id].append(tp)
        moved = True
        while moved:  # 3. balanced
            moved = False
            for member_id in sorted(ids, key=lambda m: (-len(held[m]), m)):
                source = member_id
                off_rack_first = sorted(held[source], reverse=True, key=lambda t: (
                    not on_rack(source, t), topics[t[0]].name, t[1]))
                for tp in off_rack_first:
                    target = least_loaded(tp)
                    if len(held[member_id]) - len(held[target]) >= 2:
                        held[member_id].remove(tp)
                        held[target].append(tp)
                        moved = True
                        break
                if moved:
                    break
        return {member_id: assignment_of(held[member_id]) for member_id in ids}


def _homogeneous_quota(members: Mapping[str, MemberSubscription],
                       topics: Mapping[uuid.UUID, TopicMetadata]) -> int:
    """With identical subscriptions, the most a member may keep (``ceil(partitions /
    members)``), so that balancing has little left to move; otherwise no cap."""
    subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
    if len(subscriptions) != 1:
        return sys.maxsize
    total = sum(topics[t].num_partitions for t in next(iter(subscriptions)) if t in topics)
    return -(-total // max(1, len(members)))
