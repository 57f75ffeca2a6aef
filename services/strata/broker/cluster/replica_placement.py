"""Replica placement: which brokers hold each partition of a new topic (or new partitions).

Pure (no I/O, no randomness: the caller passes ``start_index``). Kafka's
``AdminUtils.assignReplicasToBrokers`` rules, rack-aware when any broker has a rack:

* brokers are ordered by id, or — with racks — alternating between racks (``a1 b1 c1 a2 b2
  ...``), so consecutive brokers in the order sit on different racks;
* partition ``p``'s first replica (its preferred leader) is broker ``(start_index + p) % n`` of
  that order, so leadership spreads evenly; the followers are taken after it with a shift that
  grows every ``n`` partitions, so followers spread too;
* with racks, a follower is only placed on a rack that holds none of the partition's replicas
  yet, until every rack holds one; a broker never holds two replicas of one partition.

``assign_replicas`` raises ``PlacementError`` when the replication factor exceeds the brokers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class PlacementError(ValueError):
    """The placement asked for cannot be made (more replicas than brokers)."""


@dataclass(frozen=True, slots=True)
class PlacementBroker:
    node_id: int
    rack: str | None = None


def rack_alternated(brokers: Sequence[PlacementBroker]) -> list[PlacementBroker]:
    """Brokers ordered by id, interleaved across racks when any has one."""
    ordered = sorted(brokers, key=lambda b: b.node_id)
    if not any(b.rack for b in ordered):
        return ordered
    by_rack: dict[str, list[PlacementBroker]] = {}
    for broker in ordered:
        by_rack.setdefault(broker.rack or "", []).append(broker)
    racks = sorted(by_rack)
    out: list[PlacementBroker] = []
    depth = 0
    while len(out) < len(ordered):
        for rack in racks:
            if depth < len(by_rack[rack]):
                out.append(by_rack[rack][depth])
        depth += 1
    return out


def assign_replicas(brokers: Sequence[PlacementBroker], partitions: int, replication_factor: int,
                    *, start_index: int = 0, first_partition: int = 0) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition + partitions - 1``
    (preferred leader first)."""
    if replication_factor < 1:
        raise PlacementError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered.")
    order = rack_alternated(brokers)
    n = len(order)
    rack_count = len({b.rack for b in order}) if any(b.rack for b in order) else 0
    out: list[tuple[int, ...]] = []
    for p in range(first_partition, first_partition + partitions):
        first = (start_index + p) % n
        shift = (start_index + p // n) % max(n - 1, 1)
        chosen = [order[first]]
        racks_used = {order[first].rack}
        step = 0
        while len(chosen) < replication_factor:
            offset = 1 + (shift + step) % max(n - 1, 1)
            step += 1
            candidate = order[(first + offset) % n]
            if candidate in chosen:
                if step > 2 * n:  # every broker tried: cannot happen with rf <= n
                    raise PlacementError("no broker left for a replica")
                continue
            strict = step <= n - 1
            if (rack_count and strict and candidate.rack in racks_used
                    and len(racks_used) < rack_count):
                continue
            chosen.append(candidate)
            racks_used.add(candidate.rack)
        out.append(tuple(b.node_id for b in chosen))
    return out
