"""``range``: the server-side range assignor (KIP-848), co-partitioning and sticky.

Kafka's server-side ``RangeAssignor``. Per topic, independently: the members subscribed to it,
sorted by member id, share its partitions so that each has ``partitions // members`` and the
first ``partitions % members`` of them one more (the *quota*); a member keeps the partitions of
its current target assignment up to its quota (lowest indexes first), and the partitions left
over fill the members below their quota in member order, lowest indexes first. Without a
current assignment this is the classic range layout: members with the same subscriptions get
the same partition indexes of co-partitioned topics.

*Rack-aware* when members send their rack and the partitions' replica racks are known
(``partition_assignor.rack_aware``): before the leftovers are handed out in order, each member
below its quota first takes free partitions with a replica on its rack (lowest indexes first).
Quotas and stickiness are unchanged (co-partitioning then holds only where the racks agree).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Final

from strata.broker.group.consumer_group_member import Assignment
from strata.broker.group.partition_assignor import (
    MemberSubscription,
    TopicMetadata,
    rack_aware,
    rack_matches,
)

RANGE_ASSIGNOR_NAME: Final = "range"


class RangeAssignor:
    """See the module docstring."""

    name: Final = RANGE_ASSIGNOR_NAME

    def assign(self, members: Mapping[str, MemberSubscription],
               topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]:
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
        aware = rack_aware(members, topics)
        for metadata in sorted(topics.values(), key=lambda t: t.name):
            topic_id = metadata.topic_id
            subscribed = sorted(m for m, spec in members.items()
                                if topic_id in spec.subscribed_topic_ids)
            if not subscribed:
                continue
            base, extra = divmod(metadata.num_partitions, len(subscribed))
            quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(subscribed)}
            taken: set[int] = set()
            chosen: dict[str, list[int]] = {m: [] for m in subscribed}
            for member_id in subscribed:
                current = members[member_id].assigned.get(topic_id, frozenset())
                for index in sorted(current):
                    if (index < metadata.num_partitions and index not in taken
                            and len(chosen[member_id]) < quota[member_id]):
                        chosen[member_id].append(index)
                        taken.add(index)
            if aware:
                for member_id in subscribed:
                    for index in range(metadata.num_partitions):
                        if len(chosen[member_id]) >= quota[member_id]:
                            break
                        if index not in taken and rack_matches(members[member_id], metadata,
                                                               index):
                            chosen[member_id].append(index)
                            taken.add(index)
            free = iter(i for i in range(metadata.num_partitions) if i not in taken)
            for member_id in subscribed:
                while len(chosen[member_id]) < quota[member_id]:
                    chosen[member_id].append(next(free))
            for member_id, indexes in chosen.items():
                if indexes:
                    result[member_id][topic_id] = frozenset(indexes)
        return {m: a for m, a in result.items()}
