"""``bench.scale_figures``: nearest-rank percentiles, VmRSS parsing, which partitions a Metadata
answer shows as not ready, the sampled partitions, and the targets' verdicts (no broker)."""

from __future__ import annotations

import pytest

from bench.scale_figures import (
    GIB,
    PartitionState,
    idle_cost,
    percentile,
    rss_bytes,
    sample,
    targets,
    unready,
)

STATUS = """\
Name:\tpython
VmPeak:\t  912340 kB
VmHWM:\t  301000 kB
VmRSS:\t  250880 kB
Threads:\t8
"""


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20, shuffled order must not matter
    assert percentile(list(reversed(values)), 50) == 10.0
    assert percentile(values, 99) == 20.0  # the tail of 20 samples is their largest
    assert percentile(values, 100) == 20.0
    assert percentile(values, 5) == 1.0
    assert percentile([7.5], 50) == 7.5


@pytest.mark.parametrize("q", [0, -1, 101])
def test_percentile_outside_range_raises(q: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], q)


def test_percentile_of_nothing_raises() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_rss_is_vmrss_in_bytes() -> None:
    assert rss_bytes(STATUS) == 250880 * 1024


def test_rss_missing_raises() -> None:
    with pytest.raises(ValueError):
        rss_bytes("Name:\tkthreadd\nState:\tS (sleeping)\n")


def test_unready_needs_a_leader_a_full_isr_and_no_error() -> None:
    states = [
        PartitionState(0, 1, (0, 1, 2), (0, 1, 2)),       # ready
        PartitionState(1, -1, (0, 1, 2), (0, 1, 2)),      # no leader
        PartitionState(2, 2, (0, 1, 2), (2, 0)),          # ISR short of RF 3
        PartitionState(3, 0, (0, 1, 2), (2, 0, 1), 0),    # ready, ISR in another order
        PartitionState(4, 0, (0, 1, 2), (0, 1, 2), 9),    # REPLICA_NOT_AVAILABLE
        PartitionState(5, 0, (0, 1, 2), (0, 1, 5)),       # ISR outside the replica set
    ]
    assert unready(reversed(states), 3) == [1, 2, 4, 5]
    assert unready(states[:1], 3) == []


def test_sample_spreads_over_the_topic() -> None:
    assert sample(10_000, 100)[:3] == [0, 100, 200]
    assert len(sample(10_000, 100)) == 100
    assert sample(10_000, 100)[-1] == 9_900
    assert sample(5, 100) == [0, 1, 2, 3, 4]


def test_idle_cost_is_the_share_of_throughput_lost() -> None:
    assert idle_cost(100_000, 95_000) == pytest.approx(5.0)
    assert idle_cost(100_000, 110_000) == pytest.approx(-10.0)
    with pytest.raises(ValueError):
        idle_cost(0, 1)


def test_targets_are_judged_against_the_issues_limits() -> None:
    ready, recovery, memory, cost = targets(29.9, 61.0, 2 * GIB, None)
    assert ready.met is True and "met" in ready.line() and "NOT" not in ready.line()
    assert recovery.met is False and "NOT MET" in recovery.line()
    assert memory.measured == 2.0 and memory.met is False
    assert cost.met is None and "not measured" in cost.line()
    assert targets(30.0, 60.0, GIB, 10.0)[3].met is True  # the limits themselves are met
