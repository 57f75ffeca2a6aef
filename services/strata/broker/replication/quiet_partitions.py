"""The partitions of a follower's incremental fetch that a read may skip: nothing to send, nothing
new to tell, nothing to change.

Kafka reads every partition of a fetch session on every fetch and leaves out of the incremental
response those without news (``FetchSession``, ``readFromLog``, ``maybeUpdateResponseData``).
A leader's session with a follower holds every partition it leads for that follower — hundreds
on a broker with a thousand partitions — while a producer writes to a few at a time (the sticky
partitioner), so almost all of them are *quiet* on each fetch, and reading them was most of a
leader's fetch handling (about 4 us a partition here). ``is_quiet`` answers whether a partition
that the request did not name is quiet; the Fetch handler then neither reads nor answers it.

A partition is quiet for follower ``replica_id`` when a read of it would

* return no records: the session's fetch offset is the leader's log end offset;
* return no error: this broker leads it, its log is online, the session's leader epoch (when the
  follower sent one) is the current one and, in a session by topic id, the hosted log's topic id
  is the session's (a topic re-created under the same name is not quiet);
* tell the follower nothing new: the high watermark, last stable offset and log start offset
  are those the session last answered (so ``FetchPartition.maybe_update_response_data`` would
  leave it out of the response);
* change no replication state: the follower is in the ISR and the leader's record of it is
  already at this offset, so the fetch can expand no ISR and move no high watermark. That record
  is only written by a read at this offset in the current leadership (a new leadership resets
  it), and that read ran the diverging-epoch check, which nothing since can have changed: the
  log end, the epoch and the session's offsets are all as they were then.

The fetch is still recorded, lazily: the partition's follower state takes the session's
``SessionClock`` (``FollowerState.on_quiet_fetch``), which the handler moves to each fetch's
time, so the follower's last fetch and caught-up times read as fresh as with a read and ISR
shrinks decide on the same times — without touching the partition on each fetch.

Nor does a fetch ask ``is_quiet`` about every partition of the session. ``SessionWatch`` (one
per follower session) names the *candidates*: the partitions the request named, those the last
fetch read (a read may leave a partition that is quiet only from the next fetch on), and those
whose key the fetch purgatory was notified of since the last fetch (its journal: an append, a
high watermark move, a leadership or ISR change, DeleteRecords — everything above that can end
a partition's quietness on this broker's loop goes through ``ReplicaManager`` and notifies it).
Every partition of the session is a candidate when the session's partitions changed, when the
journal dropped notifications the watch had not read, and at least every
``FULL_CHECK_INTERVAL_MS`` (a bound on what a change outside the list above — a log going
offline, a log start moved by retention — can go unseen). Every candidate's clock is taken off
(``settled``) before the clock moves; a quiet candidate takes it again.

Invariants: skipping a quiet partition changes neither the response nor any state other than
what reading it would have changed; a partition not among the candidates is quiet (it was at
the last fetch, and nothing that could change that happened since).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Generic, Protocol, TypeVar

from strata.broker.replication.delayed_operation import Purgatory
from strata.broker.replication.follower_state import SessionClock
from strata.broker.replication.partition import NO_LEADER_EPOCH, Partition

FULL_CHECK_INTERVAL_MS: Final = 1000
TopicPartition = tuple[str, int]


class SessionPartition(Protocol):
    """What a fetch session remembers of a partition (``strata.broker.fetch_session``)."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    high_watermark: int
    last_stable_offset: int
    local_log_start_offset: int


P = TypeVar("P", bound=SessionPartition)


class SessionWatch(Generic[P]):
    """What the Fetch handler keeps of one follower session between its fetches: the
    session's clock, its partitions by ``(topic, partition)``, and where the last fetch left
    the purgatory's journal (module docstring)."""

    __slots__ = ("clock", "keys", "last_full_ms", "membership", "position", "read")

    def __init__(self) -> None:
        self.clock = SessionClock()
        self.keys: dict[TopicPartition, P] = {}
        self.membership = -1
        self.position = -1
        self.last_full_ms = 0
        self.read: Sequence[P] = ()  # what the last fetch read

    def candidates(self, partitions: Iterable[P], membership: int,
                   purgatory: Purgatory[TopicPartition], now_ms: int) -> list[P] | None:
        """The partitions of the session, ``partitions`` (its ``membership`` count), that
        may not be quiet now besides those the request named; None: every one may not."""
        notified = purgatory.notified_since(self.position)
        self.position = purgatory.position
        if (notified is None or membership != self.membership
                or not 0 <= now_ms - self.last_full_ms < FULL_CHECK_INTERVAL_MS):
            self.membership = membership
            self.keys = {(p.topic, p.partition): p for p in partitions if p.topic is not None}
            self.last_full_ms = now_ms
            return None
        keys = self.keys
        found = [keys[key] for key in notified if key in keys]
        found.extend(self.read)
        return found


def is_quiet(get: Callable[[tuple[str, int]], Partition | None], replica_id: int, now_ms: int,
             clock: SessionClock, p: SessionPartition) -> bool:
    """Whether follower ``replica_id``'s fetch may skip ``p`` (module docstring); when it may,
    the fetch is recorded on the partition as standing for the session's fetches (``clock``)
    until ``p`` is a candidate again. ``p``'s follower state loses any clock first."""
    name = p.topic
    if name is None:
        return False
    partition = get((name, p.partition))
    if partition is None:
        return False
    follower = partition.followers.get(replica_id)
    if follower is not None and follower.session_clock is not None:
        partition.followers[replica_id] = follower = follower.settled()
    if partition.leader_id != partition.node_id:
        return False
    log = partition.log
    fetch_offset = p.fetch_offset
    epoch = p.current_leader_epoch
    if (fetch_offset != log.log_end_offset or log.offline
            or (epoch != NO_LEADER_EPOCH and epoch != partition.leader_epoch)
            or (p.topic_id.int and p.topic_id.int != partition.topic_id.int)):
        return False
    high_watermark = log.high_watermark
    if (high_watermark != p.high_watermark or log.log_start_offset != p.local_log_start_offset
            or log.last_stable_offset(high_watermark) != p.last_stable_offset):
        return False
    if (follower is None or follower.log_end_offset != fetch_offset
            or replica_id not in partition.isr):
        return False
    partition.followers[replica_id] = follower.on_quiet_fetch(now_ms, clock)
    return True


def has_records_or_error(get: Callable[[tuple[str, int]], Partition | None],
                         partitions: Iterable[SessionPartition]) -> bool:
    """Whether a read of any of ``partitions`` might return records or an error: the check a
    parked follower fetch makes on each wake-up before it skips and reads again (most wake-ups
    are high watermark moves that give it nothing to send)."""
    for p in partitions:
        name = p.topic
        if name is None:
            continue
        partition = get((name, p.partition))
        if partition is None or partition.leader_id != partition.node_id:
            return True
        log = partition.log
        epoch = p.current_leader_epoch
        if (p.fetch_offset != log.log_end_offset or log.offline
                or (epoch != NO_LEADER_EPOCH and epoch != partition.leader_epoch)):
            return True
    return False
