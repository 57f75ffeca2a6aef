"""The batch and streaming readers of the ``strata`` source.

Planning (``partitions``, ``initialOffset``, ``latestOffset``) runs on the driver and asks the
brokers for partitions and watermarks (:mod:`strata.spark.kafka_io`); the offset arithmetic is
in :mod:`strata.spark.offsets`. ``read()`` runs in executor workers on a pickled copy of the
reader: the readers pickle only their parsed options (and, for ``availableNow``, a target
position map), never a client. The streaming reader keeps one driver-side consumer between
triggers (each trigger asks for partitions and watermarks; a new client costs ~60 ms), left
out of its pickled state and closed by ``stop()``.

Streaming offsets are ``{"topic": {"partition": next offset}}``, end-exclusive, stored only in
Spark's checkpoint: ``commit`` sends nothing to the brokers. Partitions that appear while a
query runs are read from their log start. With ``Trigger.AvailableNow`` the reader fixes the
high watermarks at :meth:`StrataStreamReader.prepareForTriggerAvailableNow` and never goes past
them, while still honouring ``maxOffsetsPerTrigger`` per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from strata.spark import kafka_io
from strata.spark.offsets import (
    OffsetRange,
    Positions,
    check_batch_bounds,
    from_json,
    plan_ranges,
    rate_limit,
    resolve,
    split_ranges,
    to_json,
)
from strata.spark.options import EARLIEST, LATEST, SourceOptions

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark task's work: one :class:`OffsetRange` (``value``)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The records of one planned partition. When a plan has no partition at all (an empty
    topic, an empty offset range), Spark still runs one task, with ``InputPartition(None)``:
    it reads nothing."""
    if isinstance(partition, RangePartition):
        return kafka_io.read_range(options, partition.offset_range)
    if partition.value is None:
        return iter(())
    raise TypeError(f"not a partition planned by the strata source: {partition!r}")


def _start_positions(options: SourceOptions, partitions: list[tuple[str, int]],
                     log_start: Positions, latest: Positions) -> Positions:
    if options.starting_timestamp_ms is not None:
        return kafka_io.offsets_for_timestamp(options, partitions,
                                              options.starting_timestamp_ms, latest)
    return resolve(options.starting, partitions, log_start, latest, default=EARLIEST)


def _plan(options: SourceOptions, start: Positions, end: Positions,
          log_start: Positions) -> list[InputPartition]:
    ranges, warnings = plan_ranges(start, end, log_start,
                                   fail_on_data_loss=options.fail_on_data_loss)
    for warning in warnings:
        log.warning("%s; skipping (failOnDataLoss=false)", warning)
    return [RangePartition(r) for r in split_ranges(ranges, options.min_partitions)]


class StrataBatchReader(DataSourceReader):
    """``spark.read.format("strata")``: the records between two resolved positions."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        partitions = kafka_io.discover_partitions(options)
        log_start, latest = kafka_io.watermarks(options, partitions)
        start = _start_positions(options, partitions, log_start, latest)
        end = resolve(options.ending, partitions, log_start, latest, default=LATEST)
        check_batch_bounds(start, end, latest)
        return _plan(options, start, end, log_start)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class StrataStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("strata")``: micro-batches of offset ranges."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        # Set by prepareForTriggerAvailableNow: latestOffset never passes these positions.
        self.available_now_target: Positions | None = None
        # The driver's consumer, kept between triggers; never pickled (see __getstate__).
        self._consumer: Consumer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_consumer": None}

    def _planner(self) -> Consumer:
        if self._consumer is None:
            self._consumer = kafka_io.planning_consumer(self.options)
        return self._consumer

    def _watermarks(self) -> tuple[Positions, Positions]:
        partitions = kafka_io.discover_partitions(self.options, self._planner())
        return kafka_io.watermarks(self.options, partitions, self._planner())

    def initialOffset(self) -> dict[str, dict[str, int]]:
        partitions = kafka_io.discover_partitions(self.options, self._planner())
        log_start, latest = kafka_io.watermarks(self.options, partitions, self._planner())
        return to_json(_start_positions(self.options, partitions, log_start, latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        _log_start, latest = self._watermarks()
        self.available_now_target = latest

    def latestOffset(self, start: dict[str, dict[str, int]],
                     limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin_at = from_json(start)
        log_start, latest = self._watermarks()
        target = self.available_now_target
        if target is not None:
            # Nothing written after availableNow began: no new partitions, no newer records.
            latest = {tp: min(offset, target[tp]) for tp, offset in latest.items()
                      if tp in target}
        # A partition that appeared since `start` is read from its log start.
        begin = {tp: begin_at.get(tp, log_start[tp]) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, limit.max_rows)
        else:
            end = dict(latest)
        # A partition whose log went backwards keeps its position; partitions() reports it.
        end = {tp: max(end[tp], begin[tp]) if latest[tp] >= begin[tp] else latest[tp]
               for tp in end}
        return to_json(end)

    def partitions(self, start: dict[str, dict[str, int]],
                   end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        start_at, end_at = from_json(start), from_json(end)
        if start_at == end_at:
            return []
        log_start, _latest = kafka_io.watermarks(self.options, sorted(end_at), self._planner())
        return _plan(self.options, start_at, end_at, log_start)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in the brokers."""

    def stop(self) -> None:
        """The query stopped: close the driver's consumer."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
