"""Console sessions: who a browser is logged in as, and the CSRF token bound to that login.

Owns ``SessionStore``, an in-memory map from an unguessable session id (the ``strata_console``
cookie's value, 256 random bits) to a ``Session``: the Kafka principal the login proved
(``User:<name>``, or None when the admin service runs without authentication) and the CSRF
token every form of that session carries (``strata.admin.console.csrf``).

Invariants: a session lives ``ttl_s`` from its login and is never extended (a stolen cookie is
good for at most that long); ``get`` of an expired or unknown id is None and forgets it; at most
``max_sessions`` are kept (the oldest is dropped first), so anonymous visitors cannot grow the
map without bound. The clock is injected, so expiry is tested without waiting. The store is
only touched from the event loop (no lock); it does not survive a restart of the service, which
logs every browser out — the safe failure.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

COOKIE_NAME: Final = "strata_console"
DEFAULT_TTL_S: Final = 8 * 3600.0
DEFAULT_MAX_SESSIONS: Final = 10_000

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Session:
    """One browser's login: its id (the cookie), principal, CSRF token and expiry."""

    id: str
    principal: str | None
    csrf_token: str
    expires_at: float


class SessionStore:
    """Sessions by id, expiring ``ttl_s`` after login, at most ``max_sessions`` of them."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 clock: Clock = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, principal: str | None) -> Session:
        """A new session for ``principal`` with fresh id and CSRF token."""
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32),
                          self._clock() + self.ttl_s)
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id; None if unknown or expired (then forgotten)."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self._clock() >= session.expires_at:
            del self._sessions[session_id]
            return None
        return session

    def delete(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)
