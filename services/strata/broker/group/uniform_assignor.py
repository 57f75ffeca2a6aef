"""``uniform``: the default server-side assignor (KIP-848), balanced and sticky.

Kafka's ``UniformAssignor`` (its homogeneous and heterogeneous builders, here one algorithm).
Rules, in order:

1. *Sticky*: every member keeps the partitions of its current target assignment that still
   exist and that it still subscribes to (a partition claimed twice stays with the member
   first by id);
2. *Complete*: every other partition goes to the least loaded member subscribed to its topic
   (partitions with the fewest possible owners first; ties by member id);
3. *Balanced*: while some member holds at least two partitions more than a member that could
   take one of them, one such partition moves from the most loaded member to the least loaded
   eligible one. With identical subscriptions every member ends within one partition of the
   others; with different subscriptions no single move improves the spread. Each move lowers
   the sum of squared loads, so this terminates.

Deterministic: the answer depends only on its inputs (members by id, partitions by topic name
and index). Racks are not considered (yet).
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
        for member_id in ids:  # 1. sticky
            spec = members[member_id]
            for topic_id in sorted(spec.assigned, key=str):
                metadata = topics.get(topic_id)
                if metadata is None or topic_id not in spec.subscribed_topic_ids:
                    continue
                for index in sorted(spec.assigned[topic_id]):
                    tp = (topic_id, index)
                    if (index < metadata.num_partitions and tp not in owner
                            and len(held[member_id]) < cap):
                        owner[tp] = member_id
                        held[member_id].append(tp)
        unassigned = [tp for tp in sorted_partitions(topics, subscribers) if tp not in owner]
        unassigned.sort(key=lambda tp: len(subscribers[tp[0]]))  # stable: keeps name order
        for tp in unassigned:  # 2. complete
            member_id = min(subscribers[tp[0]], key=lambda m: (len(held[m]), m))
            owner[tp] = member_id
            held[member_id].append(tp)
        moved = True
        while moved:  # 3. balanced
            moved = False
            for member_id in sorted(ids, key=lambda m: (-len(held[m]), m)):
                for tp in sorted(held[member_id], key=lambda t: (topics[t[0]].name, t[1]),
                                 reverse=True):
                    target = min(subscribers[tp[0]], key=lambda m: (len(held[m]), m))
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
