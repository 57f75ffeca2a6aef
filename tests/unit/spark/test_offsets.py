"""strata.spark.offsets: resolving specs, the backlog split, range planning and data loss."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata.spark.offsets import (
    DataLossError,
    OffsetRange,
    check_batch_bounds,
    from_json,
    plan_ranges,
    rate_limit,
    resolve,
    split_ranges,
    to_json,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_json_round_trip_uses_string_partitions() -> None:
    positions = {A1: 7, A0: 3, B0: 0}
    assert to_json(positions) == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json(to_json(positions)) == positions
    assert from_json({"a": {0: 1}}) == {A0: 1}  # int keys too (before a JSON round trip)


def test_resolve_sentinels_and_defaults() -> None:
    log_start, latest = {A0: 2, A1: 0}, {A0: 10, A1: 5}
    assert resolve("earliest", [A0, A1], log_start, latest, default="latest") == {A0: 2, A1: 0}
    assert resolve("latest", [A0, A1], log_start, latest, default="earliest") == {A0: 10, A1: 5}
    spec = {"a": {0: -1}}
    assert resolve(spec, [A0, A1], log_start, latest, default="earliest") == {A0: 10, A1: 0}
    spec = {"a": {0: 4, 1: -2}}
    assert resolve(spec, [A0, A1], log_start, latest, default="latest") == {A0: 4, A1: 0}


def test_rate_limit_splits_in_proportion_to_backlog() -> None:
    start = {A0: 0, A1: 100, B0: 0}
    latest = {A0: 600, A1: 400, B0: 100}  # backlogs 600, 300, 100
    assert rate_limit(start, latest, 100) == {A0: 60, A1: 130, B0: 10}
    assert rate_limit(start, latest, 10_000) == latest


def test_rate_limit_never_exceeds_the_limit_with_many_small_backlogs() -> None:
    start = {("t", p): 0 for p in range(10)}
    latest = {("t", p): 1 for p in range(10)}
    end = rate_limit(start, latest, 3)
    assert sum(end[tp] - start[tp] for tp in start) == 3


@given(
    backlogs=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=8),
    limit=st.integers(min_value=1, max_value=2000),
)
def test_rate_limit_reads_exactly_min_of_limit_and_backlog(backlogs: list[int],
                                                           limit: int) -> None:
    start = {("t", p): 10 * p for p in range(len(backlogs))}
    latest = {tp: start[tp] + size for tp, size in zip(start, backlogs, strict=True)}
    end = rate_limit(start, latest, limit)
    taken = {tp: end[tp] - start[tp] for tp in start}
    assert sum(taken.values()) == min(limit, sum(backlogs))
    assert all(0 <= taken[tp] <= latest[tp] - start[tp] for tp in start)


def test_plan_ranges_reads_new_partitions_from_the_log_start() -> None:
    ranges, warnings = plan_ranges({A0: 3}, {A0: 5, A1: 4, B0: 0}, {A0: 0, A1: 1, B0: 0},
                                   fail_on_data_loss=True)
    assert ranges == [OffsetRange("a", 0, 3, 5), OffsetRange("a", 1, 1, 4)]
    assert warnings == []


@pytest.mark.parametrize(
    ("start", "end", "log_start", "kept"),
    [
        ({A0: 2}, {A0: 10}, {A0: 5}, [OffsetRange("a", 0, 5, 10)]),  # retention removed 2..4
        ({A0: 2, A1: 0}, {A0: 3}, {A0: 0}, [OffsetRange("a", 0, 2, 3)]),  # a-1 deleted
        ({A0: 8}, {A0: 3}, {A0: 0}, []),  # log truncated
    ],
)
def test_data_loss_raises_or_is_skipped_with_a_warning(start, end, log_start, kept) -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        plan_ranges(start, end, log_start, fail_on_data_loss=True)
    ranges, warnings = plan_ranges(start, end, log_start, fail_on_data_loss=False)
    assert ranges == kept
    assert len(warnings) == 1


def test_split_ranges_covers_the_same_offsets_with_at_least_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 5, 15)]
    split = split_ranges(ranges, 5)
    assert len(split) >= 5
    for original in ranges:
        parts = [r for r in split if r.partition == original.partition]
        assert parts[0].from_offset == original.from_offset
        assert parts[-1].until_offset == original.until_offset
        assert all(x.until_offset == y.from_offset for x, y in itertools.pairwise(parts))
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges


def test_batch_bounds_name_the_option() -> None:
    with pytest.raises(ValueError, match=r"^endingOffsets:"):
        check_batch_bounds({A0: 0}, {A0: 11}, {A0: 10})
    with pytest.raises(ValueError, match=r"^startingOffsets:"):
        check_batch_bounds({A0: 6}, {A0: 5}, {A0: 10})
    check_batch_bounds({A0: 5}, {A0: 5}, {A0: 10})
