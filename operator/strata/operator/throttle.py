"""Which replication throttles (KIP-73) a batch of reassignments needs: pure planning.

What ``kafka-reassign-partitions --throttle`` sets, planned from the assignment before the move
and the batch's targets (Kafka's ``calculateLeaderThrottles`` / ``calculateFollowerThrottles``):

* ``leader.replication.throttled.replicas`` of each moving partition's topic: every *existing*
  replica of the moving partitions (``partition:broker``; any of them may lead and serve the
  new replicas);
* ``follower.replication.throttled.replicas``: the *new* replicas (in the target, not in the
  current list);
* ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` = the
  throttle (bytes per second) on every broker in a moving partition's current or target list.

Brokers hold back only replicas that are not in sync (see the broker's ``replication_quota``),
so the throttles never slow the ISR. A plan travels in the owner's status (``to_status`` /
``from_status``) so that an operator restarted mid-batch still removes what it set once the
batch is done. A partition whose target equals its current list needs nothing.

``REBALANCE_THROTTLE_DEFAULT``: 50 MiB/s, a rate a broker's disk and network carry beside its
clients' traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

TopicPartition = tuple[str, int]

LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
TOPIC_CONFIGS: Final = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
BROKER_CONFIGS: Final = (LEADER_RATE, FOLLOWER_RATE)
REBALANCE_THROTTLE_DEFAULT: Final = 50 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ThrottlePlan:
    """The topic configs and the brokers of one batch's throttle."""

    topics: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    brokers: tuple[int, ...] = ()
    rate: int = 0

    @property
    def empty(self) -> bool:
        return not self.topics

    def broker_configs(self) -> dict[str, str]:
        return dict.fromkeys(BROKER_CONFIGS, str(self.rate))

    def to_status(self) -> dict[str, Any]:
        return {"rate": self.rate, "brokers": list(self.brokers),
                "topics": [{"topic": t, **dict(c)} for t, c in sorted(self.topics.items())]}

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> ThrottlePlan:
        if not status:
            return cls()
        topics = {str(e["topic"]): {k: str(e.get(k, "")) for k in TOPIC_CONFIGS}
                  for e in status.get("topics") or ()}
        return cls(topics, tuple(int(b) for b in status.get("brokers") or ()),
                   int(status.get("rate", 0)))


def plan_throttles(current: Mapping[TopicPartition, tuple[int, ...]],
                   targets: Mapping[TopicPartition, tuple[int, ...]],
                   rate: int) -> ThrottlePlan:
    """The throttles moving ``targets`` from ``current`` needs at ``rate`` bytes/s (an empty
    plan for ``rate`` <= 0: unthrottled)."""
    if rate <= 0:
        return ThrottlePlan()
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in targets.items():
        existing = tuple(current.get((topic, partition), ()))
        if tuple(target) == existing:
            continue
        leaders.setdefault(topic, set()).update((partition, b) for b in existing)
        followers.setdefault(topic, set()).update(
            (partition, b) for b in target if b not in existing)
        brokers.update(existing)
        brokers.update(target)
    topics = {topic: {LEADER_REPLICAS: _replicas(leaders[topic]),
                      FOLLOWER_REPLICAS: _replicas(followers.get(topic, set()))}
              for topic in sorted(leaders)}
    return ThrottlePlan(topics, tuple(sorted(brokers)), rate)


def _replicas(entries: set[tuple[int, int]]) -> str:
    return ",".join(f"{p}:{b}" for p, b in sorted(entries))
