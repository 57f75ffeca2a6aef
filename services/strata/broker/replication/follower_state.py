"""What a partition leader knows of one follower: its log end offset, its log start offset and
when it was caught up.

Kafka's ``cluster.Replica`` (the leader-side state of a remote replica), as a pure value updated
by each of the follower's fetches. Times are milliseconds passed in by the caller (the broker's
injected clock); nothing here reads a clock.

The caught-up rule (Kafka's ``Replica.updateFetchStateOrThrow`` and its ``lastCaughtUpTimeMs``):
a fetch from offset ``o`` when the leader's log end offset is ``leo``

* with ``o >= leo``: the follower has everything, so it is caught up *now*;
* else with ``o >=`` the leader's log end offset at the follower's *previous* fetch: it had
  everything the leader had back then, so it was caught up at the time of that previous fetch.

A follower is out of sync when it has not been caught up for longer than
``replica.lag.time.max.ms`` (and is not at the leader's end right now). ``last_caught_up_ms``
never moves backwards. A follower's log end offset is the offset it fetches from: everything
below it is in its log. Its log start offset is what its last fetch reported (Fetch v5+
``log_start_offset``, Kafka's ``followerStartOffset``; -1 until the first fetch); the leader's
low watermark, which DeleteRecords waits for, is the smallest of them (``delayed_delete_records``).

A follower's quiet partitions (``strata.broker.replication.quiet_partitions``) are not touched
on each of its fetches: their state carries the ``SessionClock`` of the follower's fetch session
instead, which says when the session last fetched. While a state carries one, the follower was
at ``log_end_offset`` = the leader's log end offset at every fetch of that session since the
state was written, up to the clock's time (the Fetch handler keeps this true: before it moves
the clock, it takes the clock off every partition that may have changed since the last fetch,
``settled``). So the state reads as if each of those fetches had been recorded with
``on_fetch``: ``caught_up_ms`` and ``settled`` take the clock's time into account.

Invariants: ``log_end_offset`` is -1 until the first fetch (unknown); a fresh state (a new
leadership, or a follower that just joined the replicas) counts as caught up at its creation
time, as Kafka resets it when a leader is elected, so followers are not shrunk out of the ISR
before they had a chance to fetch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

UNKNOWN_OFFSET: Final = -1


class SessionClock:
    """When a follower's fetch session last fetched (milliseconds); moved only forward, by
    the Fetch handler."""

    __slots__ = ("last_fetch_ms",)

    def __init__(self, last_fetch_ms: int = 0) -> None:
        self.last_fetch_ms = last_fetch_ms

    def advance(self, now_ms: int) -> None:
        if now_ms > self.last_fetch_ms:
            self.last_fetch_ms = now_ms


@dataclass(frozen=True, slots=True)
class FollowerState:
    """The leader's view of one follower replica."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    session_clock: SessionClock | None = field(default=None, compare=False)

    @classmethod
    def reset(cls, replica_id: int, now_ms: int) -> FollowerState:
        """The state when this broker becomes the leader: nothing known, caught up as of now."""
        return cls(replica_id, last_caught_up_ms=now_ms, last_fetch_ms=now_ms)

    def on_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int,
                 log_start_offset: int | None = None) -> FollowerState:
        """The state after a fetch from ``fetch_offset`` while the leader's LEO was
        ``leader_log_end_offset`` (module docstring); ``log_start_offset`` is the one the fetch
        reported (None: the one known stays)."""
        state = self.settled() if self.session_clock is not None else self
        caught_up = state.last_caught_up_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(caught_up, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            caught_up = max(caught_up, state.last_fetch_ms)
        # The constructor, not ``dataclasses.replace``: this runs per partition per fetch.
        return FollowerState(self.replica_id, fetch_offset, caught_up, now_ms,
                             leader_log_end_offset,
                             self.log_start_offset if log_start_offset is None
                             else log_start_offset)

    def on_quiet_fetch(self, now_ms: int, clock: SessionClock) -> FollowerState:
        """The state after a fetch at the leader's log end offset (= ``log_end_offset``)
        that also stands for the session's next fetches, as long as they find the partition
        quiet (module docstring)."""
        state = self.settled() if self.session_clock is not None else self
        end = self.log_end_offset
        return FollowerState(self.replica_id, end, max(state.last_caught_up_ms, now_ms),
                             max(state.last_fetch_ms, now_ms), end, state.log_start_offset,
                             clock)

    def settled(self) -> FollowerState:
        """This state with its session clock's time written in, and no clock."""
        clock = self.session_clock
        if clock is None:
            return self
        at = clock.last_fetch_ms
        return FollowerState(self.replica_id, self.log_end_offset,
                             max(self.last_caught_up_ms, at), max(self.last_fetch_ms, at),
                             self.log_end_offset, self.log_start_offset)

    @property
    def caught_up_ms(self) -> int:
        """When the follower was last caught up (its session clock's time included)."""
        clock = self.session_clock
        if clock is None:
            return self.last_caught_up_ms
        return max(self.last_caught_up_ms, clock.last_fetch_ms)

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """In sync: at the leader's end now, or caught up within the last ``max_lag_ms``."""
        return (self.log_end_offset >= leader_log_end_offset
                or now_ms - self.caught_up_ms <= max_lag_ms)
