"""Operator-driven partition changes: ElectLeaders and partition reassignments (KIP-455/460).

Owns the write path shared by the ``elect_leaders``, ``alter_partition_reassignments`` and
``list_partition_reassignments`` handlers: each change is computed by the pure rules of
``partition_change`` from the broker's current image and written as a compare-and-set on the
partition's registration (a concurrent change by the controller or the leader makes it fail
with a retriable error); the handler's broker then waits until its own image shows the change.
The controller completes a reassignment once the new replicas have joined the ISR.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata.broker.cluster import image as ci
from strata.broker.cluster.cluster import Cluster
from strata.broker.cluster.image import PartitionRegistration
from strata.broker.cluster.partition_change import reassign, reconcile_partition
from strata.protocol.error_codes import ErrorCode

PREFERRED = 0
UNCLEAN = 1


class PartitionAdminError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _registration(cluster: Cluster, topic: str, index: int) -> PartitionRegistration:
    registration = cluster.image.partitions.get((topic, index))
    if registration is None:
        raise PartitionAdminError(ErrorCode.unknown_topic_or_partition,
                                  f"{topic}-{index} does not exist")
    return registration


async def _write(cluster: Cluster, topic: str, index: int, new: PartitionRegistration) -> None:
    version = cluster.image.partition_versions[(topic, index)]
    written = await cluster.store.compare_and_set(ci.partition_key(topic, index), new.encode(),
                                                  version=version)
    if written is None:
        raise PartitionAdminError(ErrorCode.not_controller,
                                  f"{topic}-{index} changed concurrently; retry")
    await cluster.cache.wait_for_revision(written)


async def elect_leader(cluster: Cluster, topic: str, index: int, election_type: int) -> None:
    """Kafka's ElectLeaders for one partition; raises ``PartitionAdminError``."""
    p = _registration(cluster, topic, index)
    image = cluster.image
    live = image.electable()
    if election_type == PREFERRED:
        preferred = p.replicas[0]
        if p.leader == preferred:
            raise PartitionAdminError(ErrorCode.election_not_needed,
                                      f"{preferred} already leads {topic}-{index}")
        new = reconcile_partition(p, live, preferred=True)
        if new is None or new.leader != preferred:
            raise PartitionAdminError(
                ErrorCode.preferred_leader_not_available,
                f"the preferred leader {preferred} of {topic}-{index} is not live and in "
                f"the ISR {list(p.isr)}")
    elif election_type == UNCLEAN:
        if p.has_leader and p.leader in live:
            raise PartitionAdminError(ErrorCode.election_not_needed,
                                      f"{topic}-{index} has a leader ({p.leader})")
        new = reconcile_partition(p, live, unclean=True)
        if new is None or not new.has_leader:
            raise PartitionAdminError(ErrorCode.eligible_leaders_not_available,
                                      f"no replica of {topic}-{index} is live")
    else:
        raise PartitionAdminError(ErrorCode.invalid_request,
                                  f"unknown election type {election_type}")
    await _write(cluster, topic, index, new)


async def alter_reassignment(cluster: Cluster, topic: str, index: int,
                             replicas: Sequence[int] | None) -> None:
    """Start (``replicas``) or cancel (None) the reassignment of one partition."""
    p = _registration(cluster, topic, index)
    if replicas is None:
        if not p.adding and not p.removing:
            raise PartitionAdminError(ErrorCode.no_reassignment_in_progress,
                                      f"no reassignment of {topic}-{index} is in progress")
        original = tuple(r for r in p.replicas if r not in p.adding)
        await _write(cluster, topic, index, reassign(p, original))
        return
    target = tuple(int(r) for r in replicas)
    if not target or len(set(target)) != len(target):
        raise PartitionAdminError(ErrorCode.invalid_replica_assignment,
                                  f"the replicas {list(target)} of {topic}-{index} must be "
                                  "non-empty and distinct")
    unknown = [r for r in target if r not in cluster.image.brokers]
    if unknown:
        raise PartitionAdminError(ErrorCode.invalid_replica_assignment,
                                  f"brokers {unknown} are not registered")
    if target == p.replicas and not p.adding and not p.removing:
        return
    await _write(cluster, topic, index, reassign(p, target))


def ongoing_reassignments(cluster: Cluster, topics: Sequence[tuple[str, Sequence[int] | None]]
                          | None) -> dict[str, list[tuple[int, PartitionRegistration]]]:
    """Partitions with a reassignment in progress, by topic (all topics for None)."""
    image = cluster.image
    wanted = topics if topics is not None else [(name, None) for name in sorted(image.topics)]
    out: dict[str, list[tuple[int, PartitionRegistration]]] = {}
    for name, indexes in wanted:
        for index, p in image.topic_partitions(name):
            if (indexes is None or index in indexes) and (p.adding or p.removing):
                out.setdefault(name, []).append((index, p))
    return out

