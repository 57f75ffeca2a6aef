"""``LogEvents``: what the log manager's background work reports, for whoever measures it.

The storage core knows nothing of Prometheus; the broker's ``log_metrics`` implements this
protocol and the ``LogManager`` calls it (``LogManager.events``; None: nobody listens):

* ``flushed(seconds)``: one log's fsync (``flush.messages`` / ``flush.ms``, shutdown) and how
  long it took — Kafka's ``LogFlushRateAndTimeMs``;
* ``segments_deleted(topic, partition, segments, size)``: retention removed whole segments of
  a log's head (``retention.ms``, ``retention.bytes``, log start offset);
* ``cleaned(stats)``: one compaction round of the cleaner (bytes read and written, records).

Calls come from whichever thread did the work (flushes and cleaning run on worker threads,
retention on the event loop), once per log and round, never per record. Implementations
must be thread-safe and cheap.

The time ``LogManager.startup`` spent loading and recovering the logs is not an event (it
happens before anyone could listen): it stays on the manager as ``recovery_seconds``.
"""

from __future__ import annotations

from typing import Protocol

from strata.storage.cleaner import CleanerStats


class LogEvents(Protocol):
    def flushed(self, seconds: float) -> None: ...

    def segments_deleted(self, topic: str, partition: int, segments: int, size: int) -> None: ...

    def cleaned(self, stats: CleanerStats) -> None: ...
