"""Where a follower cuts its log before fetching from a new leader (KIP-101, KIP-279).

Pure: given the leader's OffsetForLeaderEpoch answer for the follower's latest epoch, and the
follower's own view of that epoch, decide the truncation offset and whether another round is
needed. Kafka's ``AbstractFetcherThread.getOffsetTruncationState``:

* the leader knows nothing of epochs (end offset -1): truncate to the follower's high watermark,
  the only offset known to be on the leader (pre-KIP-101 behaviour);
* the leader's answer carries no epoch (-1) but an end offset: truncate to it, done;
* the follower does not know the epoch the leader answered with: truncate to where the
  follower's largest epoch below it ends, then ask again with the follower's new latest epoch
  (KIP-279: a follower that missed whole epochs converges in a few rounds);
* both know the epoch: truncate to the smaller of the two end offsets, done.

Never beyond the follower's log end offset; never below 0. ``UNDEFINED`` is Kafka's -1 for both
an unknown epoch and an unknown offset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

UNDEFINED: Final = -1


class Truncation(NamedTuple):
    """Cut the log to ``offset``; ``done`` False means: ask the leader again afterwards."""

    offset: int
    done: bool


def truncation_for(
    leader_epoch: int,
    leader_end_offset: int,
    *,
    follower_end_offset_for: Callable[[int], tuple[int, int]],
    follower_log_end_offset: int,
    follower_high_watermark: int,
) -> Truncation:
    """The truncation of a follower whose OffsetForLeaderEpoch got ``(leader_epoch,
    leader_end_offset)``; ``follower_end_offset_for(epoch)`` is the follower's own
    ``(largest epoch <= epoch, its end offset)`` (the leader-epoch cache)."""
    end = follower_log_end_offset
    if leader_end_offset == UNDEFINED:
        return Truncation(min(follower_high_watermark, end), True)
    if leader_epoch == UNDEFINED:
        return Truncation(max(0, min(leader_end_offset, end)), True)
    follower_epoch, follower_end = follower_end_offset_for(leader_epoch)
    if follower_end == UNDEFINED:
        return Truncation(max(0, min(leader_end_offset, end)), True)
    if follower_epoch != leader_epoch:
        return Truncation(max(0, min(follower_end, end)), False)
    return Truncation(max(0, min(leader_end_offset, follower_end, end)), True)
