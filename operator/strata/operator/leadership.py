"""Whether this operator replica stands by: kopf peering, read the way kopf reads it. Pure.

With ``kopf run --peering=<name>`` every replica writes ``{identity: {priority, lifetime,
lastseen}}`` into the peering object's ``status``, and kopf pauses its own watchers while a live
peer has a higher priority. The Broker resync loop is the operator's own task, not a kopf
handler, so kopf cannot pause it: ``outranked`` lets it stand by under the same rule.

Invariant: a replica never counts itself: its priority is drawn at random (``main.configure``),
so a live peer with the same priority is taken to be this replica (kopf pauses every replica on
a real tie; both checks then agree that nobody outranks anybody, and kopf's freeze holds).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any


def _lastseen(text: Any) -> datetime.datetime | None:
    try:
        when = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def outranked(status: Mapping[str, Any] | None, priority: int, now: datetime.datetime) -> bool:
    """True when a live peer in a peering object's ``status`` has a higher priority."""
    for info in (status or {}).values():
        if not isinstance(info, Mapping):
            continue
        seen = _lastseen(info.get("lastseen"))
        lifetime = datetime.timedelta(seconds=int(info.get("lifetime", 60)))
        if seen is None or seen + lifetime <= now:
            continue
        if int(info.get("priority", 0)) > priority:
            return True
    return False
