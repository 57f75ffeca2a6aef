"""Pure decisions for a Broker's pods: which pod to restart next, and whether a scale-down may
shrink the StatefulSet. No I/O: the cluster's health comes in through a callable, so tests drive
every branch without a cluster.

Rolling restart (StatefulSet ``updateStrategy: OnDelete``; Strimzi's rules, plus one fix):

1. A pod is *outdated* when its ``strata.dev/config-hash`` differs from the StatefulSet's.
2. An outdated pod that is not ready is restarted first and at once: it serves nothing, and
   waiting for it to become ready is how rolling updates stall on a bad config.
3. Otherwise nothing is restarted while any pod is missing, terminating or not ready.
4. Otherwise the cluster is asked (over the Kafka protocol) whether any partition is
   under-replicated (ISR smaller than its replicas); if so, or if it cannot be asked, wait.
5. Otherwise delete the outdated pod with the highest ordinal (the StatefulSet order).

So at most one broker is down at a time, and only when every partition has its full ISR.

Scale-down: the brokers that go are the highest ordinals (``node.id`` = ordinal). The
StatefulSet shrinks only once no partition has a replica on them; until then the decision is
a reassignment plan moving those replicas to the remaining brokers (least-loaded first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from strata.operator import conditions

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PodView:
    """What the decision needs to know about one broker pod."""

    name: str
    ordinal: int
    ready: bool
    config_hash: str | None
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """The answer to "may a broker go down now?", asked over the Kafka protocol."""

    reachable: bool
    under_replicated: tuple[TopicPartition, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class RollDecision:
    """``delete`` names the pod to restart now (or None); ``settled`` means nothing to roll."""

    delete: str | None
    settled: bool
    reason: str
    message: str


def under_replicated(partitions: Iterable[tuple[TopicPartition, Sequence[int], Sequence[int]]]
                     ) -> tuple[TopicPartition, ...]:
    """Partitions whose ISR is smaller than their replica set (``(tp, replicas, isr)`` rows)."""
    return tuple(sorted(tp for tp, replicas, isr in partitions if len(isr) < len(replicas)))


def _names(tps: Sequence[TopicPartition], limit: int = 5) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:limit])
    return shown + (f" and {len(tps) - limit} more" if len(tps) > limit else "")


def decide_roll(pods: Sequence[PodView], desired_hash: str, replicas: int,
                health: Callable[[], ClusterHealth]) -> RollDecision:
    wanted = {p.ordinal: p for p in pods if p.ordinal < replicas}
    outdated = sorted((p for p in wanted.values()
                       if p.config_hash != desired_hash and not p.terminating),
                      key=lambda p: -p.ordinal)
    terminating = [p.name for p in pods if p.terminating]
    missing = [o for o in range(replicas) if o not in wanted]
    unready = [p.name for p in wanted.values() if not p.ready and not p.terminating]

    if not outdated:
        if missing or terminating or unready:
            waiting = unready + terminating + [f"ordinal {o}" for o in missing]
            return RollDecision(None, False, conditions.PODS_NOT_READY,
                                f"waiting for {', '.join(sorted(waiting))}")
        return RollDecision(None, True, conditions.BROKERS_READY,
                            f"{replicas} brokers ready")
    if terminating:
        return RollDecision(None, False, conditions.ROLLING_RESTART,
                            f"waiting for {', '.join(sorted(terminating))} to terminate")
    outdated_unready = [p for p in outdated if not p.ready]
    if outdated_unready:
        pod = outdated_unready[0]
        return RollDecision(pod.name, False, conditions.ROLLING_RESTART,
                            f"restarting {pod.name} (outdated and not ready)")
    if missing or unready:
        waiting = unready + [f"ordinal {o}" for o in missing]
        return RollDecision(None, False, conditions.PODS_NOT_READY,
                            f"rolling restart waits for {', '.join(sorted(waiting))}")
    answer = health()
    if not answer.reachable:
        return RollDecision(None, False, conditions.CLUSTER_UNREACHABLE,
                            f"rolling restart waits: cannot ask the cluster ({answer.error})")
    if answer.under_replicated:
        return RollDecision(None, False, conditions.WAITING_FOR_IN_SYNC_REPLICAS,
                            "rolling restart waits for under-replicated partitions: "
                            + _names(answer.under_replicated))
    pod = outdated[0]
    return RollDecision(pod.name, False, conditions.ROLLING_RESTART,
                        f"restarting {pod.name} ({len(outdated)} outdated)")


# ------------------------------------------------------------------------------ scale-down
@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """``replicas`` to set on the StatefulSet now; ``reassignments`` to request first."""

    replicas: int
    reassignments: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    blocked: str = ""


def plan_reassignment(assignment: Mapping[TopicPartition, Sequence[int]], leaving: set[int],
                      remaining: Sequence[int]) -> dict[TopicPartition, tuple[int, ...]]:
    """New replica lists with every leaving broker replaced by a remaining one.

    The replacement is the least-loaded remaining broker not already a replica (ties: the
    lowest id); order is kept, so a leaving preferred leader is replaced in first position.
    Raises ``ValueError`` if a partition has more replicas than there are remaining brokers.
    """
    load = Counter(b for replicas in assignment.values() for b in replicas if b not in leaving)
    plan: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in sorted(assignment):
        replicas = list(assignment[tp])
        if not leaving.intersection(replicas):
            continue
        if len(replicas) > len(remaining):
            raise ValueError(f"{tp[0]}-{tp[1]} has {len(replicas)} replicas but only "
                             f"{len(remaining)} brokers would remain")
        for i, broker in enumerate(replicas):
            if broker in leaving:
                choice = min((b for b in remaining if b not in replicas),
                             key=lambda b: (load[b], b))
                replicas[i] = choice
                load[choice] += 1
        plan[tp] = tuple(replicas)
    return plan


def decide_scale(current: int, desired: int,
                 assignment: Mapping[TopicPartition, Sequence[int]] | None) -> ScaleDecision:
    """Whether the StatefulSet may go from ``current`` to ``desired`` brokers now.

    ``assignment`` is the replica assignment read from the cluster (None: could not be read).
    """
    if desired >= current:
        return ScaleDecision(desired)
    if assignment is None:
        return ScaleDecision(current, blocked="scale-down waits: cannot read the replica "
                                              "assignment from the cluster")
    leaving = set(range(desired, current))
    remaining = list(range(desired))
    try:
        plan = plan_reassignment(assignment, leaving, remaining)
    except ValueError as exc:
        return ScaleDecision(current, blocked=f"scale-down refused: {exc}")
    if not plan:
        return ScaleDecision(desired)
    return ScaleDecision(current, reassignments=plan,
                         blocked=f"scale-down waits: {len(plan)} partitions have replicas on "
                                 f"brokers {sorted(leaving)} and are being reassigned")
