"""Follower truncation before fetching from a new leader (KIP-101/279), table-driven.

The follower's leader-epoch cache in every case: epoch 0 from offset 0, epoch 2 from 10,
epoch 4 from 20; its log end offset is 30 and its high watermark 25.
"""

from __future__ import annotations

import pytest

from strata.broker.replication.follower_truncation import Truncation, truncation_for

FOLLOWER_EPOCHS = [(0, 0), (2, 10), (4, 20)]
LEO, HW = 30, 25


def follower_end_offset_for(epoch: int) -> tuple[int, int]:
    """The cache's answer (same rules as LeaderEpochFileCache.end_offset_for)."""
    if epoch == -1:
        return -1, -1
    if epoch == FOLLOWER_EPOCHS[-1][0]:
        return epoch, LEO
    later = [start for e, start in FOLLOWER_EPOCHS if e > epoch]
    earlier = [e for e, _ in FOLLOWER_EPOCHS if e <= epoch]
    if not later:
        return -1, -1
    return (earlier[-1] if earlier else epoch), later[0]


@pytest.mark.parametrize(
    ("leader_epoch", "leader_end", "expected"),
    [
        (4, 27, Truncation(27, True)),   # same latest epoch, the leader ended it earlier
        (4, 40, Truncation(30, True)),   # the leader has more: nothing to cut
        (2, 18, Truncation(18, True)),   # the leader's epoch 2 ended at 18, ours at 20
        (3, 22, Truncation(20, False)),  # epoch 3 unknown here: cut to our epoch-2 end, ask again
        (-1, 12, Truncation(12, True)),  # no epoch in the answer: its end offset
        (-1, -1, Truncation(25, True)),  # the leader knows no epochs: our high watermark
    ],
)
def test_truncation(leader_epoch: int, leader_end: int, expected: Truncation) -> None:
    got = truncation_for(leader_epoch, leader_end, follower_end_offset_for=follower_end_offset_for,
                         follower_log_end_offset=LEO, follower_high_watermark=HW)
    assert got == expected


def test_rounds_converge_when_the_follower_missed_epochs() -> None:
    """The leader's history: epoch 0 from 0, epoch 3 from 12 (it never saw our epochs 2, 4).
    Round 1 asks for our latest (4): the leader's largest <= 4 is 3, ending at its end (35); we
    do not know 3, so cut to where our epoch 2 ends (20) and ask again with our new latest (2):
    the leader's largest <= 2 is 0, ending at 12; we know 0 (it ends at 10 here): cut to 10."""
    first = truncation_for(3, 35, follower_end_offset_for=follower_end_offset_for,
                           follower_log_end_offset=LEO, follower_high_watermark=HW)
    assert first == Truncation(20, False)
    second = truncation_for(0, 12, follower_end_offset_for=follower_end_offset_for,
                            follower_log_end_offset=20, follower_high_watermark=HW)
    assert second == Truncation(10, True)
