"""How many partition replicas this broker can hold, and the check that refuses more.

Kafka has no such limit: it documents a high ``nofile`` (100,000+) and lets a broker that
outgrows it fail with "Too many open files". Strata refuses instead. A broker asked to host
~3,950 partitions under a 20,000-descriptor limit (~5 descriptors per partition kept open)
used to exhaust it, logged 290 tracebacks and stalled every client.

The budget, per broker process:

* ``raise_open_file_limit`` lifts the soft ``RLIMIT_NOFILE`` to the hard one at startup (what
  Kafka's scripts leave to ``ulimit -n``) and reports both.
* ``DESCRIPTORS_PER_PARTITION`` (1): the storage core keeps one descriptor per hosted partition
  at rest, its active segment's ``.log`` (indexes are mapped without one; see
  ``strata.storage.file_mapping`` and ``log_segment``).
* Older (inactive) segments' ``.log`` files borrow a descriptor, when read, from one bounded
  process-wide pool (``strata.storage.descriptor_pool``, ``MAX_OPEN_INACTIVE_SEGMENTS`` = 256,
  counting those that slices still send from): the least recently used one is closed when it
  is full. Its size is budgeted on its own.
* ``RESERVED_DESCRIPTORS`` stay free for everything else: client connections, replica fetchers,
  the metadata store, checkpoints, the cleaner's temporary segments, a read's transient
  descriptor when the pool is at its bound.

So ``capacity = (soft limit - RESERVED_DESCRIPTORS - pool size) // DESCRIPTORS_PER_PARTITION``
(18,720 under a 20,000 limit; 9,488 before the pool, at 2 per partition), lowered by
``strata.max.partitions.per.broker`` when that is set (it can only lower it: the broker never
promises what its descriptors cannot hold). Every creation - CreateTopics, CreatePartitions,
Metadata's auto-creation - that would take this broker's hosted replicas past the capacity is
refused with POLICY_VIOLATION and a message naming the limit. ``validate_only`` requests are
refused the same way.

A replica count is this broker's share: in a cluster a new topic's replicas are spread round
robin over the live brokers, so this broker gets ``ceil(partitions * replication factor /
live brokers)`` of them (or exactly those a manual assignment names). The check is local: each
broker guards itself; the other brokers' capacity is assumed alike.
"""

from __future__ import annotations

import logging
import math
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strata.storage.descriptor_pool import DESCRIPTOR_POOL

if TYPE_CHECKING:
    from strata.broker.broker_state import BrokerState

logger = logging.getLogger(__name__)

DESCRIPTORS_PER_PARTITION: Final = 1
RESERVED_DESCRIPTORS: Final = 1024
MAX_PARTITIONS_CONFIG: Final = "strata.max.partitions.per.broker"
"""Optional broker config: an upper bound on hosted partition replicas (below the derived one)."""


class PartitionCapacityError(Exception):
    """A creation that would exceed the capacity (answered POLICY_VIOLATION by the handlers)."""


@dataclass(frozen=True, slots=True)
class PartitionCapacity:
    """The capacity in force and how it was derived (for the refusal message and the log)."""

    limit: int
    open_file_limit: int
    configured: int | None

    def describe(self) -> str:
        derived = (f"{self.open_file_limit} file descriptors (RLIMIT_NOFILE) less "
                   f"{RESERVED_DESCRIPTORS} reserved and {DESCRIPTOR_POOL.max_open} for "
                   f"inactive segments, at {DESCRIPTORS_PER_PARTITION} per partition")
        if self.configured is not None and self.configured < self.derived:
            return f"{MAX_PARTITIONS_CONFIG}={self.configured} (the descriptors allow " \
                   f"{self.derived}: {derived})"
        return f"{self.limit} partitions: {derived}"

    @property
    def derived(self) -> int:
        return derived_capacity(self.open_file_limit)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns ``(soft, hard)`` after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            logger.warning("cannot raise the open file limit from %d to %d: %s", soft, target,
                           exc)
    return soft, hard


def derived_capacity(open_file_limit: int, pool_size: int | None = None) -> int:
    """Partition replicas ``open_file_limit`` descriptors can hold beside the reserve and a
    pool of ``pool_size`` inactive segments' descriptors (default: the process's pool's
    bound), per the module docstring."""
    pool = DESCRIPTOR_POOL.max_open if pool_size is None else pool_size
    return max((open_file_limit - RESERVED_DESCRIPTORS - pool) // DESCRIPTORS_PER_PARTITION, 0)


def current_capacity(configured: str | None) -> PartitionCapacity:
    """The capacity now: the soft limit as it is (raised at startup), capped by the config."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_files = soft if soft != resource.RLIM_INFINITY else 1_048_576
    derived = derived_capacity(open_files)
    explicit = int(configured) if configured not in (None, "") else None
    limit = derived if explicit is None else min(explicit, derived)
    return PartitionCapacity(limit, open_files, explicit)


def replicas_here(node_id: int, partitions: int, replication_factor: int, live_brokers: int,
                  assignment: Sequence[Sequence[int]] | None = None) -> int:
    """How many of the new replicas this broker would host (module docstring)."""
    if assignment is not None:
        return sum(1 for replicas in assignment if node_id in replicas)
    live = max(live_brokers, 1)
    return math.ceil(partitions * min(replication_factor, live) / live)


def hosted_replicas(state: BrokerState) -> int:
    """Partition replicas this broker holds now (loaded logs and offline ones)."""
    log_manager = state.log_manager
    return len(log_manager.all_logs()) + len(log_manager.offline_partitions)


def check_capacity(state: BrokerState, new_replicas: int, what: str) -> None:
    """Raise ``PartitionCapacityError`` if ``new_replicas`` more would exceed the capacity."""
    if new_replicas <= 0:
        return
    capacity = current_capacity(state.config.get(MAX_PARTITIONS_CONFIG))
    hosted = hosted_replicas(state)
    if hosted + new_replicas > capacity.limit:
        raise PartitionCapacityError(
            f"{what} would place {new_replicas} partition replica(s) on broker "
            f"{state.node_id}, which hosts {hosted}: more than it can hold ("
            f"{capacity.describe()}). Raise the open file limit (ulimit -n) or use fewer "
            f"partitions.")
