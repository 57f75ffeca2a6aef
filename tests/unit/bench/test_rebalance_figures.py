"""``bench.rebalance_figures``: the stable-assignment predicate, pauses, and printed lines
(no broker, no client)."""

from __future__ import annotations

import pytest

from bench.rebalance_figures import (
    Measurement,
    consumed_again,
    figure_line,
    is_stable,
    longest_pause,
    percentile,
    speedup,
)

PARTITIONS = [("t", p) for p in range(5)]


def test_stable_means_each_partition_once_and_loads_within_one() -> None:
    assert is_stable({"a": PARTITIONS[:3], "b": PARTITIONS[3:]}, PARTITIONS)
    assert not is_stable({"a": PARTITIONS[:4], "b": PARTITIONS[4:]}, PARTITIONS)  # 4 vs 1
    assert not is_stable({"a": PARTITIONS[:3], "b": PARTITIONS[2:]}, PARTITIONS)  # twice
    assert not is_stable({"a": PARTITIONS[:2], "b": PARTITIONS[3:]}, PARTITIONS)  # missing
    assert not is_stable({}, PARTITIONS)
    # more members than partitions: the extra ones hold nothing, and that is stable
    assert is_stable({"a": PARTITIONS[:1], "b": [], "c": []}, PARTITIONS[:1])


def test_longest_pause_counts_the_window_edges() -> None:
    assert longest_pause([1.0, 1.5, 3.5, 9.0], 1.0, 4.0) == pytest.approx(2.0)
    assert longest_pause([], 1.0, 4.0) == pytest.approx(3.0)
    assert longest_pause([2.0], 1.0, 4.0) == pytest.approx(2.0)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([], 50) == 0.0


def test_lines_and_speedup() -> None:
    eager = Measurement("classic-eager", "join", 10, 100, 3.0, (2.5, 2.9, 3.0))
    consumer = Measurement("consumer", "join", 10, 100, 1.0, (0.1, 0.2))
    assert figure_line(consumer) == ("protocol=consumer event=join members=10 partitions=100 "
                                     "stable=1.00 s consumed=- pause.max=0.20 s pause.p50=0.10 s")
    assert "stable=NOT STABLE" in figure_line(Measurement("consumer", "leave", 1, 1, None, ()))
    assert speedup(eager, consumer) == "3.0x"
    assert speedup(eager, None) == "-"
    fast = Measurement("consumer", "join", 10, 100, 3.0, (), consumed_s=0.5)
    slow = Measurement("classic-eager", "join", 10, 100, 3.0, (), consumed_s=2.0)
    assert speedup(slow, fast, "consumed_s") == "4.0x"
    assert speedup(eager, fast, "consumed_s") == "-"  # eager's not measured
    assert "consumed=0.50 s" in figure_line(fast)


def test_consumed_again_waits_for_each_partition_at_its_final_owner_after_it_got_it() -> None:
    a, b = ("t", 0), ("t", 1)
    batches = {"m1": [(9.0, [a, b]), (10.5, [a, b]), (11.0, [a])],
               "m2": [(10.2, [b]), (11.5, [b])]}
    # m1 kept a (consumed at 10.5), m2 got b at 11.2: its batch at 10.2 came before that
    # (a previous owner's, as in an eager rebalance), so 11.5 counts
    assert consumed_again({a: "m1", b: "m2"}, {("m2", b): 11.2}, batches, 10.0) == 1.5
    # given at 10.1: the batch at 10.2 counts, and a's 10.5 is the latest
    assert consumed_again({a: "m1", b: "m2"}, {("m2", b): 10.1}, batches, 10.0) == 0.5
    # m1 held b before but is not its owner at the end: its batches of b do not count
    assert consumed_again({a: "m1", b: "m2"}, {("m2", b): 11.6}, batches, 10.0) is None
    assert consumed_again({}, {}, batches, 10.0) == 0.0
