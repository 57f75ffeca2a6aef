"""Group-offset arithmetic (``strata groups`` and the admin service): committed offsets, lag rows,
reset plans (Kafka's clamping rules), date-times."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from strata.client.group_offsets import (
    LagRow,
    Owner,
    PartitionOffsets,
    ResetSpec,
    ResetTo,
    committed_offsets,
    lag_rows,
    parse_datetime,
    reset_plan,
)

A = Owner("m-1", "client-1", "/127.0.0.1")


def test_lag_rows_cover_assigned_and_committed_partitions() -> None:
    rows = lag_rows({("t", 1): A, ("t", 0): A}, {("t", 0): 3, ("u", 0): 9},
                    {("t", 0): 10, ("t", 1): 4, ("u", 0): 9})
    assert rows == [LagRow("t", 0, 3, 10, A), LagRow("t", 1, None, 4, A),
                    LagRow("u", 0, 9, 9, None)]
    assert [r.lag for r in rows] == [7, None, 0]


OFFSETS = {("t", 0): PartitionOffsets(5, 20, committed=12, offset_for_time=15),
           ("t", 1): PartitionOffsets(0, 8, committed=None, offset_for_time=None)}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ResetSpec(ResetTo.EARLIEST), {("t", 0): 5, ("t", 1): 0}),
        (ResetSpec(ResetTo.LATEST), {("t", 0): 20, ("t", 1): 8}),
        (ResetSpec(ResetTo.OFFSET, 7), {("t", 0): 7, ("t", 1): 7}),
        (ResetSpec(ResetTo.OFFSET, 2), {("t", 0): 5, ("t", 1): 2}),     # below the log start
        (ResetSpec(ResetTo.OFFSET, 99), {("t", 0): 20, ("t", 1): 8}),   # past the end
        (ResetSpec(ResetTo.SHIFT, -10), {("t", 0): 5, ("t", 1): 0}),    # no commit: from the end
        (ResetSpec(ResetTo.SHIFT, 3), {("t", 0): 15, ("t", 1): 8}),
        (ResetSpec(ResetTo.DATETIME, 1), {("t", 0): 15, ("t", 1): 8}),  # none that late: the end
    ],
)
def test_reset_plan(spec: ResetSpec, expected: dict[tuple[str, int], int]) -> None:
    assert reset_plan(spec, OFFSETS) == expected


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-11-23T10:00:00", 1795428000000),
        ("2026-11-23T10:00:00Z", 1795428000000),
        ("2026-11-23T11:00:00+01:00", 1795428000000),
        ("1795428000000", 1795428000000),
    ],
)
def test_parse_datetime(text: str, ms: int) -> None:
    assert parse_datetime(text) == ms


def test_parse_datetime_names_the_forms() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_datetime("yesterday")


def test_committed_offsets_leave_out_partitions_without_a_commit() -> None:
    answer = [SimpleNamespace(topic="t", partition=0, offset=5),
              SimpleNamespace(topic="t", partition=1, offset=-1001),  # OFFSET_INVALID
              SimpleNamespace(topic="t", partition=2, offset=-1),
              SimpleNamespace(topic="u", partition=0, offset=0)]
    assert committed_offsets(answer) == {("t", 0): 5, ("u", 0): 0}
