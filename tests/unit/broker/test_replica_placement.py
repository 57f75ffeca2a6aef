"""Replica placement: Kafka's spreading rules, rack awareness, and the limits."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata.broker.cluster.replica_placement import (
    PlacementBroker,
    PlacementError,
    assign_replicas,
    rack_alternated,
)


def brokers(n: int, racks: int = 0) -> list[PlacementBroker]:
    return [PlacementBroker(i, f"r{i % racks}" if racks else None) for i in range(n)]


def test_leaders_spread_evenly_and_replicas_are_distinct() -> None:
    lists = assign_replicas(brokers(3), 6, 3)
    assert Counter(r[0] for r in lists) == {0: 2, 1: 2, 2: 2}
    assert all(len(set(r)) == 3 for r in lists)


def test_start_index_rotates_the_first_leader() -> None:
    assert assign_replicas(brokers(3), 1, 1, start_index=2) == [(2,)]
    assert assign_replicas(brokers(3), 3, 1, start_index=1) == [(1,), (2,), (0,)]


def test_new_partitions_continue_the_pattern() -> None:
    whole = assign_replicas(brokers(4), 8, 2, start_index=1)
    tail = assign_replicas(brokers(4), 4, 2, start_index=1, first_partition=4)
    assert whole[4:] == tail


def test_more_replicas_than_brokers_is_refused_with_kafkas_message() -> None:
    with pytest.raises(PlacementError, match="only 2 broker"):
        assign_replicas(brokers(2), 1, 3)


def test_rack_alternation() -> None:
    ordered = rack_alternated([PlacementBroker(0, "a"), PlacementBroker(1, "a"),
                               PlacementBroker(2, "b"), PlacementBroker(3, "c")])
    assert [b.node_id for b in ordered] == [0, 2, 3, 1]


@given(n=st.integers(2, 9), racks=st.integers(2, 4), partitions=st.integers(1, 30),
       start=st.integers(0, 20), data=st.data())
def test_every_partition_spans_as_many_racks_as_it_can(n: int, racks: int, partitions: int,
                                                      start: int, data: st.DataObject) -> None:
    racks = min(racks, n)
    rf = data.draw(st.integers(1, n))
    pool = brokers(n, racks)
    rack_of = {b.node_id: b.rack for b in pool}
    for replicas in assign_replicas(pool, partitions, rf, start_index=start):
        assert len(set(replicas)) == rf
        assert len({rack_of[r] for r in replicas}) == min(rf, racks)
