"""The self-balancing planner: pure, no I/O. What Strimzi needs Cruise Control for.

Given the brokers (id -> rack, None without rack awareness) and every partition's replicas
(first = preferred leader, Kafka's rule), ``plan_balance`` proposes new replica lists such
that:

1. replicas are even across brokers: every broker holds ``floor(R/N)`` or ``ceil(R/N)`` of
   the R replicas (within ±1), whenever some move can get there;
2. preferred leaders are even the same way (within ±1 of P/N for P partitions), by
   reordering partitions' replicas (no data moves), whenever the replica lists allow it;
3. rack constraints hold: a move never lowers the number of distinct racks a partition spans
   (a partition on three racks stays on three), so rack-aware placements survive; brokers
   without racks count as racks of their own;
4. the fewest moves: a replica moves only from a broker above its fair share to one below it,
   one replica per move, so the number of replicas moved is the least any plan reaching (1)
   needs; a partition whose replicas are on no over-full broker is never touched, and among
   candidates one that keeps its preferred leader and has not moved yet is chosen first.

Partitions with a replica on a broker that is not in ``brokers`` are left alone (moving them
off a leaving broker is the scale-down's job, ``rolling.plan_reassignment``). The plan is
deterministic (ties broken by broker id and partition), so replanning from the same
assignment gives the same plan; ``batches`` cuts it into AlterPartitionReassignments requests
of at most ``size`` partitions, in partition order. The loops end: every step moves one unit
from a broker at least two above another to that one, which lowers the sum of squared counts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Assignment = Mapping[TopicPartition, Sequence[int]]


@dataclass(frozen=True, slots=True)
class BalancePlan:
    """The partitions whose replica list changes, and how much data moves."""

    reassignments: dict[TopicPartition, tuple[int, ...]]
    replica_moves: int  # replicas added to a broker (each copies the partition's data)
    leader_changes: int  # partitions whose preferred leader changes

    @property
    def empty(self) -> bool:
        return not self.reassignments


def _racks(replicas: Sequence[int], racks: Mapping[int, str | None]) -> int:
    return len({racks[b] if racks[b] is not None else f"broker-{b}" for b in replicas})


def plan_balance(racks: Mapping[int, str | None], assignment: Assignment) -> BalancePlan:
    """See the module docstring. ``racks``: every live broker id and its rack."""
    brokers = sorted(racks)
    current = {tp: list(replicas) for tp, replicas in sorted(assignment.items())
               if replicas and all(b in racks for b in replicas)}
    if not brokers or not current:
        return BalancePlan({}, 0, 0)
    moved: set[TopicPartition] = set()
    moves = _balance_replicas(brokers, racks, current, moved)
    _balance_leaders(brokers, current)
    changed = {tp: tuple(replicas) for tp, replicas in current.items()
               if tuple(replicas) != tuple(assignment[tp])}
    leaders = sum(1 for tp, replicas in changed.items() if replicas[0] != assignment[tp][0])
    return BalancePlan(changed, moves, leaders)


def _balance_replicas(brokers: list[int], racks: Mapping[int, str | None],
                      current: dict[TopicPartition, list[int]],
                      moved: set[TopicPartition]) -> int:
    counts = Counter({b: 0 for b in brokers})
    for replicas in current.values():
        counts.update(replicas)
    moves = 0
    while True:
        step = _one_move(brokers, racks, current, counts, moved)
        if step is None:
            return moves
        tp, source, target = step
        replicas = current[tp]
        replicas[replicas.index(source)] = target
        counts[source] -= 1
        counts[target] += 1
        moved.add(tp)
        moves += 1


def _one_move(brokers: list[int], racks: Mapping[int, str | None],
              current: dict[TopicPartition, list[int]], counts: Counter[int],
              moved: set[TopicPartition]) -> tuple[TopicPartition, int, int] | None:
    """The next (partition, from, to): from the fullest broker that has a movable replica to
    the emptiest broker that can take it, only while they differ by two or more."""
    for source in sorted(brokers, key=lambda b: (-counts[b], b)):
        for target in sorted(brokers, key=lambda b: (counts[b], b)):
            if counts[source] - counts[target] <= 1:
                break
            candidates = []
            for tp, replicas in current.items():
                if source not in replicas or target in replicas:
                    continue
                after = [target if b == source else b for b in replicas]
                if _racks(after, racks) < _racks(replicas, racks):
                    continue
                candidates.append((replicas[0] == source, tp in moved, tp))
            if candidates:
                return min(candidates)[2], source, target
    return None


def _balance_leaders(brokers: list[int], current: dict[TopicPartition, list[int]]) -> None:
    """Reorder replicas so preferred leaders are even (no replica moves): while some broker
    leads two more partitions than another it can reach, shift leadership along the shortest
    chain of partitions "led by a, with a replica on b" (breadth-first); every broker inside
    the chain keeps its count, the ends move one closer."""
    leaders = Counter({b: 0 for b in brokers})
    leaders.update(replicas[0] for replicas in current.values())
    while True:
        chain = None
        for source in sorted(brokers, key=lambda b: (-leaders[b], b)):
            chain = _leader_chain(source, current, leaders)
            if chain is not None:
                break
        if chain is None:
            return
        for tp, target in chain:
            replicas = current[tp]
            i = replicas.index(target)
            replicas[0], replicas[i] = target, replicas[0]
        leaders[source] -= 1
        leaders[chain[-1][1]] += 1


def _leader_chain(source: int, current: Mapping[TopicPartition, list[int]],
                  leaders: Counter[int]) -> list[tuple[TopicPartition, int]] | None:
    """The shortest chain of (partition, its new leader) from ``source`` to a broker leading
    at least two fewer partitions (None: there is none)."""
    led: dict[int, list[TopicPartition]] = {}
    for tp, replicas in current.items():
        led.setdefault(replicas[0], []).append(tp)
    back: dict[int, tuple[int, TopicPartition] | None] = {source: None}
    queue = [source]
    for broker in queue:
        for tp in led.get(broker, ()):
            for nxt in current[tp][1:]:
                if nxt in back:
                    continue
                back[nxt] = (broker, tp)
                if leaders[source] - leaders[nxt] >= 2:
                    chain = []
                    at = nxt
                    while (step := back[at]) is not None:
                        chain.append((step[1], at))
                        at = step[0]
                    return chain[::-1]
                queue.append(nxt)
    return None


def batches(plan: Mapping[TopicPartition, tuple[int, ...]], size: int
            ) -> list[dict[TopicPartition, tuple[int, ...]]]:
    """The plan in requests of at most ``size`` partitions, in partition order."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    items = sorted(plan.items())
    return [dict(items[i:i + size]) for i in range(0, len(items), size)]


def spread(brokers: Sequence[int], assignment: Assignment) -> tuple[int, int]:
    """(replicas, preferred leaders): max minus min per broker over ``brokers`` (0 or 1 is
    even); for status messages and tests."""
    counts = Counter({b: 0 for b in brokers})
    leaders = Counter({b: 0 for b in brokers})
    for replicas in assignment.values():
        counts.update(b for b in replicas if b in counts)
        if replicas and replicas[0] in leaders:
            leaders[replicas[0]] += 1
    return (max(counts.values()) - min(counts.values()),
            max(leaders.values()) - min(leaders.values()))


def fair_share(total: int, brokers: int) -> tuple[int, int]:
    """(floor, ceil) of ``total / brokers``: the counts an even cluster's brokers hold."""
    return total // brokers, math.ceil(total / brokers)
