"""The time one request keeps the broker busy, and its charge against ``request_percentage``.

Kafka's request quota (KIP-124) is a share of the broker's thread time: the time a request
occupies the network and I/O threads, as a percentage of one thread over the quota window
(``quota.window.num`` x ``quota.window.size.seconds``). Strata serves every request on one
event-loop thread, so a request's thread time is the time its work actually runs on that
thread, and 100% is the whole event loop:

- *request-thread time* (Kafka's I/O-thread time, ``requestThreadTimeNanos``): decoding the
  request plus every step of its handler coroutine — the stretches between its awaits, measured
  by ``timed`` — up to the point the throttle is decided. Waiting (a long poll, acks=all, a
  rebalance) runs nothing and costs nothing. It is ``charge``d once: recorded, and the
  throttle time returned (KIP-219's, bounded at one window; 0 within the quota);
- *network-thread time*: whatever is measured after the charge (encoding and writing the
  response, the rest of a handler that charged itself early) is recorded by ``finish``
  without throttling — it counts against the client's next request, as Kafka's
  ``recordNetworkThreadTimeCallback`` does;
- an *exempt* request (``request_quotas.request_quota_exempt``) records both into the
  manager's exempt sensor instead and is never throttled.

Invariants: every nanosecond measured is recorded at most once; only ``charge`` may throttle,
and only once. The clock is injected (``perf_counter_ns`` by default: wall time, because the
loop is unavailable to others whatever it is doing — a blocking call counts). One request,
one event loop: not thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar

from strata.broker.quotas.client_quota_manager import (
    NANOS_TO_PERCENT_PER_SECOND,
    ClientQuotaManager,
)

T = TypeVar("T")

Clock = Callable[[], int]
_DEFAULT_CLOCK: Final[Clock] = time.perf_counter_ns


class RequestTime:
    """One request's thread time and its charge against its client's request quota."""

    __slots__ = (
        "_recorded_ns",
        "busy_ns",
        "charged",
        "client_id",
        "clock",
        "exempt",
        "manager",
        "user",
    )

    def __init__(self, manager: ClientQuotaManager, user: str, client_id: str, *,
                 exempt: bool = False, clock: Clock = _DEFAULT_CLOCK) -> None:
        self.manager = manager
        self.user = user
        self.client_id = client_id
        self.exempt = exempt
        self.clock = clock
        self.busy_ns = 0
        self.charged = False
        self._recorded_ns = 0

    def add(self, nanos: int) -> None:
        """Count ``nanos`` of work done for this request outside its handler (decoding it)."""
        self.busy_ns += max(nanos, 0)

    def timed(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """``awaitable``, with the time each of its steps runs added to ``busy_ns``."""
        return _Timed(self, awaitable)

    def _take(self) -> float:
        """The percentage-seconds measured and not yet recorded (Kafka's
        ``nanosToPercentage``)."""
        nanos = self.busy_ns - self._recorded_ns
        self._recorded_ns = self.busy_ns
        return nanos * NANOS_TO_PERCENT_PER_SECOND

    def charge(self, now_ms: int) -> int:
        """Record the time so far against the quota; the throttle time (0: none). Only the
        first call may throttle; an exempt request is recorded as exempt."""
        if self.charged:
            self.finish(now_ms)
            return 0
        self.charged = True
        value = self._take()
        if self.exempt:
            self.manager.record_exempt(value, now_ms)
            return 0
        return self.manager.record_and_get_throttle_time_ms(self.user, self.client_id, value,
                                                            now_ms)

    def finish(self, now_ms: int) -> None:
        """Record what was measured since the charge, throttling nobody."""
        self.charged = True
        value = self._take()
        if value <= 0:
            return
        if self.exempt:
            self.manager.record_exempt(value, now_ms)
        else:
            self.manager.record_no_throttle(self.user, self.client_id, value, now_ms)


class _Timed:
    """Drives a coroutine (any awaitable's iterator) on behalf of the awaiting task, passing
    every future it yields up unchanged and timing each ``send`` / ``throw`` into it."""

    __slots__ = ("_awaitable", "_time")

    def __init__(self, request_time: RequestTime, awaitable: Awaitable[Any]) -> None:
        self._time = request_time
        self._awaitable = awaitable

    def __await__(self) -> Generator[Any, Any, Any]:
        inner: Any = self._awaitable.__await__()
        clock = self._time.clock
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = inner.send(to_send) if to_throw is None else inner.throw(to_throw)
            except StopIteration as stop:
                return stop.value
            finally:
                self._time.busy_ns += clock() - started
            try:
                to_send, to_throw = (yield yielded), None
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - delivered to the awaited coroutine
                to_send, to_throw = None, exc
