"""A connection's side of client quotas: the charge at a request's arrival, and the mute.

The rules are ``strata.broker.quotas.request_quotas``'s; this module applies the two of them
that belong to the connection rather than to a handler:

* ``charge_arrival``: before its handler runs, a Produce is charged its frame size against
  ``producer_byte_rate`` (the throttle goes into ``RequestContext.throttle_time_ms``), and,
  under a ``request_percentage`` quota, the request's thread-time account is opened from the
  moment its frame was received (``RequestContext.request_time``; None without one);
* ``ChannelMute``: a throttled connection handles nothing for the throttle time (KIP-219's
  muted channel; before the client-side versions the answer itself waits), cut short by
  ``release`` when the broker shuts down or the peer goes away.

Event-loop only; one ``ChannelMute`` per connection, held by at most one waiter (the serve task).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from strata.broker.network.pre_authentication import ConnectionSecurity
from strata.broker.network.request_context import RequestContext
from strata.broker.quotas.request_quotas import charge_produce, start_request_time
from strata.broker.quotas.request_time import RequestTime
from strata.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from strata.broker.broker_state import BrokerState


def charge_arrival(state: BrokerState, context: RequestContext, frame_size: int,
                   security: ConnectionSecurity, received_ns: int) -> RequestTime | None:
    """Charge a request just decoded (module docstring); its thread-time account, if any."""
    if state.quotas is None:
        return None
    header = context.header
    if header.api_key == ApiKey.PRODUCE:
        context.throttle_time_ms = charge_produce(state.quotas, context.principal,
                                                  header.client_id, frame_size,
                                                  state.clock.milliseconds())
    context.request_time = start_request_time(
        state.quotas, context, security.listener.protocol.uses_sasl,
        security.session.authenticated, received_ns)
    return context.request_time


class ChannelMute:
    """The muted channel of one connection (module docstring)."""

    __slots__ = ("_unhold",)

    def __init__(self) -> None:
        self._unhold: asyncio.Future[None] | None = None  # set while a throttle holds

    async def hold(self, seconds: float) -> None:
        """Handle nothing for ``seconds``, or until ``release``."""
        self._unhold = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._unhold, seconds)
        self._unhold = None

    def release(self) -> None:
        """End the hold in progress, if any, now."""
        if self._unhold is not None and not self._unhold.done():
            self._unhold.set_result(None)
