"""Offset arithmetic of the ``strata`` source: resolving specs, rate limits, planning ranges.

Pure functions over plain values (no Spark, no client), unit-tested on their own. Vocabulary:

- a *position* map is ``{(topic, partition): offset}``; in the checkpoint and in every offset
  Spark sees it is written ``{"topic": {"partition": offset}}`` (partition as a string, because
  the checkpoint is JSON and Spark hands keys back as strings) — :func:`to_json` /
  :func:`from_json`;
- an :class:`OffsetRange` is end-exclusive: it holds the records ``from_offset <= o <
  until_offset`` of one partition; ranges never overlap and never cover an offset twice;
- ``log_start`` is the partition's ``log_start_offset`` (Kafka's low watermark), ``latest`` its
  high watermark. A range that would start below ``log_start`` is *data loss*: with
  ``fail_on_data_loss`` it raises :class:`DataLossError`; otherwise it is clipped to
  ``log_start`` and a warning is returned for the caller to log (as Spark's Kafka source does).

The rate limit (:func:`rate_limit`) splits ``maxOffsetsPerTrigger`` across partitions in
proportion to their backlog by largest remainder, so a batch never holds more than the limit
(Spark's Kafka source rounds small shares up and can exceed it) and always makes progress while
there is a backlog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strata.spark.options import EARLIEST, EARLIEST_OFFSET, LATEST, LATEST_OFFSET, OffsetSpec

TopicPartition = tuple[str, int]
Positions = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, a deleted partition, a truncated log)."""


@dataclass(frozen=True)
class OffsetRange:
    """Records ``from_offset <= offset < until_offset`` of one partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}``, topics and partitions sorted."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def from_json(value: Mapping[str, Mapping[str, int]]) -> Positions:
    """The inverse of :func:`to_json`; accepts int or string partition keys."""
    return {(topic, int(partition)): int(offset)
            for topic, partitions in value.items() for partition, offset in partitions.items()}


def resolve(
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    log_start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    default: str,
) -> Positions:
    """Concrete offsets for ``partitions`` from ``earliest`` / ``latest`` / a JSON spec.

    In a JSON spec -2 means earliest and -1 latest; a partition the spec does not name gets
    ``default`` (``earliest`` or ``latest``). Offsets are returned as given, even past the
    high watermark (the reader then waits for them, like Kafka's).
    """
    def sentinel(tp: TopicPartition, which: str) -> int:
        return log_start[tp] if which == EARLIEST else latest[tp]

    positions: Positions = {}
    for tp in partitions:
        if isinstance(spec, str):
            positions[tp] = sentinel(tp, spec)
            continue
        offset = spec.get(tp[0], {}).get(tp[1])
        if offset is None:
            positions[tp] = sentinel(tp, default)
        elif offset == EARLIEST_OFFSET:
            positions[tp] = sentinel(tp, EARLIEST)
        elif offset == LATEST_OFFSET:
            positions[tp] = sentinel(tp, LATEST)
        else:
            positions[tp] = offset
    return positions


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> Positions:
    """The end of a batch that reads at most ``max_rows`` records in total.

    Each partition's share is proportional to its backlog ``latest - start`` (the caller puts
    a new partition in ``start`` at its log start; one missing there has no backlog). Shares
    are floored, then the leftover rows go to the largest remainders, so the shares sum to
    ``min(max_rows, total backlog)`` exactly.
    """
    if max_rows <= 0:
        raise ValueError("max_rows must be positive")
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: size * max_rows // total for tp, size in backlog.items()}
    leftover = max_rows - sum(shares.values())
    by_remainder = sorted(backlog, key=lambda tp: (-(backlog[tp] * max_rows % total), tp))
    for tp in by_remainder:
        if leftover == 0:
            break
        if shares[tp] < backlog[tp]:
            shares[tp] += 1
            leftover -= 1
    return {tp: start.get(tp, latest[tp]) + shares[tp] for tp in latest}


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    log_start: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
) -> tuple[list[OffsetRange], list[str]]:
    """Non-empty ranges from ``start`` to ``end``, and warnings about skipped (lost) offsets.

    A partition in ``end`` but not in ``start`` is new: it is read from its log start. A
    partition in ``start`` but not in ``end`` was deleted; an end below its start means the log
    was truncated or recreated; a start below the log start means retention removed records.
    All three are data loss.
    """
    ranges: list[OffsetRange] = []
    warnings: list[str] = []

    def lost(message: str) -> None:
        if fail_on_data_loss:
            raise DataLossError(
                f"{message}. Some data may have been lost; set failOnDataLoss=false to skip "
                "lost offsets with a warning instead"
            )
        warnings.append(message)

    for topic, partition in sorted(set(start) - set(end)):
        lost(f"partition {topic}-{partition} is gone (offset {start[(topic, partition)]})")
    for tp in sorted(end):
        topic, partition = tp
        until = end[tp]
        first = log_start.get(tp, 0)
        begin = start.get(tp, first)
        if until < begin:
            lost(f"{topic}-{partition}: end offset {until} is before start offset {begin} "
                 "(the log was truncated or recreated)")
            continue
        if begin < first:
            lost(f"{topic}-{partition}: offsets {begin}..{min(first, until) - 1} were removed "
                 f"from the log (log start offset is {first})")
            begin = min(first, until)
        if until > begin:
            ranges.append(OffsetRange(topic, partition, begin, until))
    return ranges, warnings


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least ``min_partitions`` ranges (when the records allow), big ranges split most.

    A range gets ``ceil(size * min_partitions / total)`` parts of nearly equal size; the
    result covers exactly the same offsets, in order.
    """
    total = sum(r.size for r in ranges)
    if not min_partitions or min_partitions <= len(ranges) or total == 0:
        return list(ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, -(-r.size * min_partitions // total)))
        step, extra = divmod(r.size, parts)
        begin = r.from_offset
        for index in range(parts):
            until = begin + step + (1 if index < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, begin, until))
            begin = until
    return result


def check_batch_bounds(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                       latest: Mapping[TopicPartition, int]) -> None:
    """A batch query's resolved bounds: end within the log, start not after end.

    Raises :class:`ValueError` naming the option (``endingOffsets`` / ``startingOffsets``).
    """
    for tp in sorted(end):
        topic, partition = tp
        if end[tp] > latest[tp]:
            raise ValueError(
                f"endingOffsets: offset {end[tp]} for {topic}-{partition} is past the end of "
                f"the log (high watermark {latest[tp]})"
            )
        if start.get(tp, 0) > end[tp]:
            raise ValueError(
                f"startingOffsets: offset {start[tp]} for {topic}-{partition} is after the "
                f"ending offset {end[tp]}"
            )
