"""The fetcher's side of a fetch session (KIP-227): Kafka's ``FetchSessionHandler``.

A fetcher that asks one broker for the same partitions over and over (a follower's replica
fetcher) opens a session with a full fetch, then sends only what changed: partitions added or
whose position (fetch offset, leader epoch, max bytes, log start offset) moved, and the ones it
no longer wants as ``forgotten``. The broker answers an incremental fetch with only the
partitions that have news (records, an error, a moved high watermark / log start offset), so
neither side encodes, decodes or walks the partitions that are idle. Pure: no I/O; the caller
sends what ``build`` returns and reports the answer with ``handle_response`` (or
``handle_error`` when none came).

Rules (Kafka's ``FetchSessionHandler`` and ``FetchMetadata``):

* without a session the request is full, epoch 0 (INITIAL: "open a session"), naming the old
  session id if there was one so the broker closes it; the answer's ``session_id`` opens the
  session (0: the broker would not cache one, and the next request is full again);
* with a session the request names ``session_id`` and the session's epoch, which moves on
  (1, 2, ..., wrapping to 1) after each answer without a top-level error;
* a top-level error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...) or no answer
  at all (a timeout, a lost connection: the broker may or may not have moved the epoch) drops
  the session: the next request is full.

A caller that knows which of its positions may have moved since the last request (a replica
fetcher: only the partitions its last answer carried, or a truncation touched) asks with
``build_changes`` instead of ``build``: the request is the same as ``build`` of every position
would give when the others did not move, without comparing them all.

Invariant: ``sent`` is what the broker's session holds once the last request was answered, so
an incremental request makes the broker's session equal to what the caller asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from strata.client.fetch_codec import FetchPosition
from strata.protocol.error_codes import ErrorCode

NO_SESSION: Final = 0
INITIAL_EPOCH: Final = 0

TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 after the full fetch, wrapping from 2**31 - 1 to 1."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class FetchRequestData(NamedTuple):
    """One request's session fields and partitions."""

    session_id: int
    epoch: int
    to_send: Sequence[FetchPosition]
    forgotten: Sequence[TopicPartition]
    full: bool


@dataclass(slots=True)
class FetchSessionHandler:
    """One fetcher's session with one broker."""

    session_id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH
    sent: dict[TopicPartition, FetchPosition] = field(default_factory=dict)
    _pending: dict[TopicPartition, FetchPosition] | None = None
    _pending_changes: bool = False  # ``_pending`` holds changes to ``sent``, not all of it
    _full: bool = True

    @property
    def incremental(self) -> bool:
        """Whether the next request may be incremental (a session is open)."""
        return self.session_id != NO_SESSION and not self._full

    def build(self, wanted: Mapping[TopicPartition, FetchPosition]) -> FetchRequestData:
        """The next request for ``wanted`` (every partition the caller wants fetched now)."""
        self._pending = dict(wanted)
        self._pending_changes = False
        if self.session_id == NO_SESSION or self._full:
            self._full = True
            return FetchRequestData(self.session_id, INITIAL_EPOCH, list(wanted.values()), (),
                                    True)
        sent = self.sent
        to_send = [position for tp, position in wanted.items() if sent.get(tp) != position]
        forgotten = [tp for tp in sent if tp not in wanted]
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten, False)

    def build_changes(self, changed: Mapping[TopicPartition, FetchPosition]) -> FetchRequestData:
        """The next incremental request when only ``changed`` (partitions already in the
        session) may have moved; every other partition stays as sent. Only while
        ``incremental``."""
        if not self.incremental:
            raise ValueError("build_changes needs an open session; build the full request")
        self._pending = dict(changed)
        self._pending_changes = True
        sent = self.sent
        to_send = [position for tp, position in changed.items() if sent.get(tp) != position]
        return FetchRequestData(self.session_id, self.epoch, to_send, (), False)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The answer to the last ``build``'s request: False when the session is dropped (a
        top-level error; the caller also ignores the answer's partitions then)."""
        pending, self._pending = self._pending, None
        if error_code != ErrorCode.none or pending is None:
            self._drop()
            return False
        if self._full:
            if session_id == NO_SESSION:  # the broker keeps no session: stay full
                self.session_id, self.sent = NO_SESSION, {}
                return True
            self.session_id, self.epoch, self._full = session_id, next_epoch(INITIAL_EPOCH), False
        else:
            self.epoch = next_epoch(self.epoch)
        if self._pending_changes:
            self.sent.update(pending)
        else:
            self.sent = pending
        return True

    def handle_error(self) -> None:
        """The last request got no answer: start over with a full fetch."""
        self._pending = None
        self._drop()

    def _drop(self) -> None:
        self._full, self.epoch, self.sent = True, INITIAL_EPOCH, {}
