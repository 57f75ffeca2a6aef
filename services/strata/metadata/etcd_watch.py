"""A watch on etcd that outlives etcd restarts: re-watch from the last revision seen.

etcd's Watch is a bidirectional gRPC stream; aetcd's own watcher shares one stream between all
watches and raises when etcd goes away. Here each ``watch_events`` generator owns one stream on
the session's channel and, whenever the stream fails (etcd killed, restarted, a leader change)
or ends, opens a new one from ``last + 1``, where ``last`` is the revision of the last fully
delivered response — so no event is lost or repeated:

* etcd never splits one revision's events across responses (we do not ask for fragments), so
  after a response every event up to its last revision has been yielded;
* events at or below ``last`` (none are expected) are dropped rather than repeated;
* if etcd compacted past ``last`` while we were away, the new stream answers with
  ``compact_revision`` and the generator raises ``CompactedError``: the caller re-lists.

Revisions in our terms: ``watch(from_revision=r)`` wants events with revision > r, so the
stream starts at ``r + 1``; ``EtcdStore.compact(c)`` compacts etcd at ``c + 1``, so etcd refuses
exactly the starts at or below ``c`` — the watches from a revision below ``c`` — and its
``compact_revision`` answer (the oldest revision it still has) is ``c + 1``.

Reconnects back off from 50 ms to 1 s and go on for as long as the caller keeps iterating; a
non-retryable gRPC error ends the watch with ``MetadataStoreError``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from aetcd import rpc

from .errors import CompactedError, MetadataStoreError
from .etcd_session import BACKOFF_INITIAL_S, BACKOFF_MAX_S, RETRYABLE, EtcdSession, map_error
from .keys import decode_key, prefix_end
from .store import EventKind, WatchEvent

log = logging.getLogger(__name__)

_DELETE = rpc.Event.EventType.DELETE


def watch_range(prefix: str) -> tuple[bytes, bytes]:
    """etcd's ``(key, range_end)`` for a prefix; ``b"\\0"`` means "from the first key" as a key
    and "to the end" as a range end."""
    raw = prefix.encode()
    return raw or b"\0", prefix_end(raw) or b"\0"


async def watch_events(
    session: EtcdSession, prefix: str, from_revision: int
) -> AsyncIterator[WatchEvent]:
    """Every event under ``prefix`` with revision > ``from_revision``; see the module."""
    key, range_end = watch_range(prefix)
    last = from_revision
    backoff = BACKOFF_INITIAL_S
    while True:
        client = await session.client()
        stop = asyncio.Event()
        call = rpc.WatchStub(client.channel).Watch(
            _requests(key, range_end, last + 1, stop), metadata=client.metadata
        )
        try:
            async for response in call:
                if response.compact_revision:
                    raise CompactedError(last, response.compact_revision - 1)
                if response.canceled:
                    raise MetadataStoreError(f"etcd cancelled the watch: {response.cancel_reason}")
                backoff = BACKOFF_INITIAL_S
                delivered = last
                for event in response.events:
                    revision = event.kv.mod_revision
                    if revision <= last:
                        continue
                    yield _event(event)
                    delivered = max(delivered, revision)
                last = delivered
            log.info("etcd watch %r: stream ended; re-watching from %d", prefix, last + 1)
        except rpc.AioRpcError as exc:
            if exc.code() not in RETRYABLE:
                raise map_error("watch", exc) from exc
            log.info(
                "etcd watch %r: %s; re-watching from revision %d", prefix, exc.details(), last + 1
            )
        finally:
            stop.set()
            call.cancel()
        await session.failover(client)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, BACKOFF_MAX_S)


async def _requests(key: bytes, range_end: bytes, start: int, stop: asyncio.Event) -> Any:
    """The client half of the stream: one create request, then open until ``stop`` (etcd
    closes a watch stream whose client half closes)."""
    yield rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(key=key, range_end=range_end, start_revision=start)
    )
    await stop.wait()


def _event(event: Any) -> WatchEvent:
    kv = event.kv
    if event.type == _DELETE:
        return WatchEvent(EventKind.DELETE, decode_key(kv.key), b"", int(kv.mod_revision))
    return WatchEvent(EventKind.PUT, decode_key(kv.key), bytes(kv.value), int(kv.mod_revision))
