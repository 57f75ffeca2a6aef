"""``RequestQueueLimit``: Kafka's ``queued.max.requests`` across all connections.

Counts frames read but not yet handled, over every connection of the broker. A connection that
finds the limit full stops reading and waits in FIFO order; as frames drain, waiting connections
are resumed in the order they stopped. Only touched from the event loop.
"""

from __future__ import annotations

from typing import Protocol


class Resumable(Protocol):
    def maybe_resume_reading(self) -> None: ...


class RequestQueueLimit:
    """``queued.max.requests`` across all connections: frames read but not yet handled.

    Connections over the limit stop reading and are resumed, in order, as frames drain. Only
    touched from the event loop.
    """

    def __init__(self, max_requests: int) -> None:
        self.max_requests = max(1, max_requests)
        self.queued = 0
        self._waiting: dict[Resumable, None] = {}

    @property
    def full(self) -> bool:
        return self.queued >= self.max_requests

    def wait(self, connection: Resumable) -> None:
        self._waiting[connection] = None

    def forget(self, connection: Resumable) -> None:
        self._waiting.pop(connection, None)

    def release(self, count: int = 1) -> None:
        self.queued -= count
        while self._waiting and not self.full:
            connection = next(iter(self._waiting))
            del self._waiting[connection]
            connection.maybe_resume_reading()
