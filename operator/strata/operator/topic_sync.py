"""Pure decisions for ``Topic`` resources: who owns a Kafka topic name, and what to change.

Ownership (Strimzi's rule, kept): two Topics in one namespace naming the same Kafka topic of
the same Broker -> the older (``creationTimestamp``, then name) wins; the newer is reported
``ResourceConflict`` and never touches Kafka, not even when it is deleted.

``decide`` compares the spec with what Kafka reports and returns the changes, in order:
create the topic; raise partitions (never lower: the CRD's CEL rule rejects a decrease at
admission, and a decrease done in Kafka cannot be undone, so it is reported); set configs
that differ; delete dynamic topic configs the spec does not name (back to the default), except
the replication throttles a move of the operator's sets meanwhile. The
same function reverts changes made directly in the cluster, run on a timer.

A ``replicas`` (replication factor) change is carried out by partition reassignment
(``plan_replication``): a partition with too many replicas keeps its first ones (the preferred
leader stays), one with too few gets the least-loaded brokers it lacks. The plan depends only on
what Kafka reports, so re-sending it each pass is idempotent: while Kafka moves a partition its
replica list is the union of old and new, which plans the same target again. ``replicas`` above
the number of brokers is refused (Kafka's ``INVALID_REPLICATION_FACTOR``), nothing is sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

OPERATOR_MANAGED_CONFIGS: Final = frozenset({"leader.replication.throttled.replicas",
                                             "follower.replication.throttled.replicas"})
"""Set and removed by the operator's throttled moves (``throttle.py``): never drift."""


@dataclass(frozen=True, slots=True)
class TopicRef:
    """One Topic resource, as far as ownership is concerned."""

    namespace: str
    name: str
    broker: str
    topic_name: str
    created: str  # RFC 3339 creationTimestamp: sorts in time order as text
    deleting: bool = False


def owner_of(me: TopicRef, others: Iterable[TopicRef]) -> TopicRef:
    """The Topic that manages ``me.topic_name`` (``me`` itself unless an older one does)."""
    rivals = [t for t in others
              if t.namespace == me.namespace and t.broker == me.broker
              and t.topic_name == me.topic_name and not t.deleting]
    return min([me, *rivals], key=lambda t: (t.created, t.name))


@dataclass(frozen=True, slots=True)
class ObservedTopic:
    """What Kafka says about the topic: partitions and the dynamically set topic configs."""

    partitions: int
    dynamic_config: Mapping[str, str] = field(default_factory=dict)
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # partition -> ids
    brokers: tuple[int, ...] = ()  # the cluster's broker ids

    @property
    def replication_factor(self) -> int | None:
        """The smallest replica count of any partition (None: no partition known)."""
        return min((len(r) for r in self.assignment.values()), default=None)


@dataclass(frozen=True, slots=True)
class TopicChanges:
    create: bool = False
    partitions: int | None = None  # CreatePartitions to this total
    set_config: Mapping[str, str] = field(default_factory=dict)
    delete_config: tuple[str, ...] = ()
    problem: str = ""  # something that cannot be fixed (partitions above the spec)
    reassign: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # partition -> ids
    replicas_problem: str = ""  # a replication factor that cannot be had (more than brokers)

    @property
    def empty(self) -> bool:
        return not (self.create or self.partitions or self.set_config or self.delete_config
                    or self.reassign)


def plan_replication(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int],
                     replicas: int) -> dict[int, tuple[int, ...]]:
    """New replica lists for the partitions whose replica count is not ``replicas``.

    Shrinking keeps the first ``replicas`` entries (the preferred leader first); growing
    appends the least-loaded brokers (replicas of this topic; ties: lowest id) not already in
    the list. Raises ``ValueError`` when ``replicas`` exceeds the number of brokers.
    """
    if replicas > len(brokers):
        raise ValueError(f"replicas {replicas} is larger than the {len(brokers)} available "
                         f"brokers {sorted(brokers)} (INVALID_REPLICATION_FACTOR)")
    load = Counter(b for ids in assignment.values() for b in ids)
    plan: dict[int, tuple[int, ...]] = {}
    for partition in sorted(assignment):
        ids = list(assignment[partition])
        if len(ids) == replicas:
            continue
        if len(ids) > replicas:
            for gone in ids[replicas:]:
                load[gone] -= 1
            ids = ids[:replicas]
        while len(ids) < replicas:
            choice = min((b for b in brokers if b not in ids), key=lambda b: (load[b], b))
            ids.append(choice)
            load[choice] += 1
        plan[partition] = tuple(ids)
    return plan


def decide(spec_partitions: int, spec_config: Mapping[str, str],
           observed: ObservedTopic | None, spec_replicas: int | None = None) -> TopicChanges:
    if observed is None:
        return TopicChanges(create=True)
    reassign: dict[int, tuple[int, ...]] = {}
    replicas_problem = ""
    if spec_replicas is not None and observed.assignment:
        try:
            reassign = plan_replication(observed.assignment, observed.brokers, spec_replicas)
        except ValueError as exc:
            replicas_problem = str(exc)
    grow = spec_partitions if spec_partitions > observed.partitions else None
    problem = ""
    if observed.partitions > spec_partitions:
        problem = (f"the topic has {observed.partitions} partitions, more than the spec's "
                   f"{spec_partitions}; Kafka cannot remove partitions: raise spec.partitions")
    set_config = {k: v for k, v in sorted(spec_config.items())
                  if observed.dynamic_config.get(k) != v}
    delete_config = tuple(sorted(k for k in observed.dynamic_config if k not in spec_config
                                 and k not in OPERATOR_MANAGED_CONFIGS))
    return TopicChanges(partitions=grow, set_config=set_config, delete_config=delete_config,
                        problem=problem, reassign=reassign, replicas_problem=replicas_problem)


def topic_ref(body: Mapping[str, Any]) -> TopicRef | None:
    """A ``TopicRef`` from a Topic object, or None if its spec has no broker."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    broker = spec.get("broker")
    if not broker:
        return None
    return TopicRef(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        broker=str(broker),
        topic_name=str(spec.get("topicName") or metadata.get("name", "")),
        created=str(metadata.get("creationTimestamp") or "9999"),
        deleting=bool(metadata.get("deletionTimestamp")),
    )
