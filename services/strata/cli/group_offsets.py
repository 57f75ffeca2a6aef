"""What ``strata groups`` computes from what the brokers answered: lag rows and reset plans.

Pure: no client, no I/O. ``groups.py`` gathers the inputs (DescribeGroups, OffsetFetch,
ListOffsets) and prints the outputs.

* ``lag_rows``: Kafka's ``kafka-consumer-groups.sh --describe`` rows — one per partition that
  is assigned to a member or has a committed offset: the committed offset (None: none), the
  log end offset, the lag (end - committed; None without a commit) and the owning member.
* ``reset_plan``: the new offset per partition for ``--to-earliest`` / ``--to-latest`` /
  ``--to-offset N`` / ``--to-datetime`` / ``--shift-by N``, Kafka's rules: an explicit or
  shifted offset is clamped into [log start offset, log end offset]; a datetime takes the
  first offset at or after it, or the log end when no record is that late.
* ``parse_datetime``: ISO 8601 (``2026-11-23T10:00:00``, ``...Z``, ``...+01:00``; no zone =
  UTC) or epoch milliseconds, to epoch milliseconds.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Owner:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    log_end_offset: int | None
    owner: Owner | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.committed, 0)


def lag_rows(assigned: Mapping[TopicPartition, Owner],
             committed: Mapping[TopicPartition, int],
             log_end_offsets: Mapping[TopicPartition, int]) -> list[LagRow]:
    """One row per partition assigned or committed, sorted by topic and partition.
    ``committed`` holds only real commits (offset >= 0)."""
    partitions = sorted(set(assigned) | set(committed))
    return [LagRow(t, p, committed.get((t, p)), log_end_offsets.get((t, p)),
                   assigned.get((t, p))) for t, p in partitions]


class ResetTo(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"
    DATETIME = "datetime"
    SHIFT = "shift-by"


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """Where to: ``value`` is the offset (OFFSET), the shift (SHIFT) or epoch ms (DATETIME)."""

    to: ResetTo
    value: int = 0


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """What the brokers said of one partition."""

    log_start_offset: int
    log_end_offset: int
    committed: int | None = None
    offset_for_time: int | None = None  # ListOffsets by the DATETIME's timestamp; None: none


def reset_plan(spec: ResetSpec,
               partitions: Mapping[TopicPartition, PartitionOffsets]) -> dict[TopicPartition, int]:
    """The new committed offset of each partition (module docstring)."""
    plan: dict[TopicPartition, int] = {}
    for tp, known in sorted(partitions.items()):
        start, end = known.log_start_offset, known.log_end_offset
        match spec.to:
            case ResetTo.EARLIEST:
                target = start
            case ResetTo.LATEST:
                target = end
            case ResetTo.OFFSET:
                target = spec.value
            case ResetTo.SHIFT:
                base = known.committed if known.committed is not None else end
                target = base + spec.value
            case ResetTo.DATETIME:
                target = known.offset_for_time if known.offset_for_time is not None else end
        plan[tp] = min(max(target, start), end)
    return plan


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 date-time (no zone: UTC) or of a plain integer;
    ``ValueError`` naming the accepted forms otherwise."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        parsed = dt.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a date-time: use ISO 8601 such as 2026-11-23T10:00:00, "
            "2026-11-23T10:00:00+01:00 (no zone means UTC), or epoch milliseconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)
