"""One client connection: frames in, requests answered strictly in order, responses out.

Owns the per-connection half of the data path (docs/architecture.md), the seams every handler uses:
``RequestContext`` (what a handler is told besides its request), ``Response`` (a pre-encoded
response body in chunks) and ``Handler``. The server (``server.py``) owns the listener and the
shared ``BrokerState``; the codec (``strata.protocol``) owns every byte format.

Flow, per connection (an asyncio ``Protocol`` on uvloop, the fastest transport measured here)::

    data_received -> FrameReader.feed -> queue of frames -> serve task (one at a time, in order)
        -> decode_request -> registry.lookup -> await handler -> write the response -> next frame

Invariants:

- requests on one connection are handled one at a time, in the order they arrived (Kafka's rule;
  clients pipeline and rely on it). The serve task is the only reader of the frame queue and the
  only writer of responses.
- back pressure: a connection takes at most ``MAX_QUEUED_FRAMES`` frames out of what it read
  (the rest stays in its ``FrameReader``, taken as the queue drains), and only those count
  against ``queued.max.requests``: one read of hundreds of small pipelined requests (a
  ``linger.ms=0`` producer) must not fill the broker-wide limit by itself. While the limit is
  full, a connection takes no frame beyond its first: one with nothing queued is still read,
  a request at a time (Kafka's queue holds at most one request per connection). Otherwise
  producers whose acks=all requests wait for the followers, with requests queued behind them,
  would stop the broker reading the followers' next fetches — what they wait for (measured: a
  30 s stall, until the followers left the ISR). Reading pauses while the connection holds
  ``MAX_QUEUED_FRAMES`` frames, or holds any while the broker holds ``queued.max.requests``
  across all connections, and while the transport's
  write buffer is not empty (write-buffer limits are 0/0, so ``pause_writing`` fires on any
  unsent byte; a TLS transport keeps its default limits, as uvloop's never resumes from 0/0);
  the serve task handles the next request only once the previous response has been handed to
  the kernel entirely (on TLS: to the TLS layer, within its high-water mark).
- a ``Response``'s ``FileSlice`` chunks of up to ``INLINE_SLICE_BYTES`` are ``pread`` and go
  out in one write with the bytes around them (a follower's fetch at a set rate answers a few KiB:
  one segment on the wire and one wake-up of the reader instead of a header write, a wait for
  the buffer to drain and a ``sendfile``). Larger ones go out with ``os.sendfile`` on a ``dup``
  of the socket fd
  (uvloop refuses ``add_writer`` on a fd its transport owns and has no ``loop.sendfile``) once
  the transport's buffer is empty, so bytes never overtake each other; if ``sendfile`` fails for
  any reason but a dead peer, the rest of the slice is ``pread`` and written normally. On a
  TLS connection (SSL, SASL_SSL listeners) bytes must pass through the TLS layer: slices are
  always ``pread`` and written. The ``Response`` keeps each ``FileSlice`` until it is sent, and
  the slice keeps its file's descriptor open (``strata.storage.descriptor_pool``): a segment the
  descriptor pool evicts, or one deleted, meanwhile still sends its own bytes. A slice read while
  that pool was at its bound carries its bytes (``FileSlice.data``): they are written as read.
- security (``strata.broker.security``): each connection has a ``ConnectionSecurity`` of its
  listener (``pre_authentication``), which refuses a request its session does not allow yet
  (anything but ApiVersions and the SASL APIs before SASL authentication): the connection
  closes. After a failed SaslAuthenticate the answer is sent, and the connection closes
  ``connection.failed.authentication.delay.ms`` later, handling nothing else. The session's
  principal reaches handlers as ``RequestContext.principal``.
- authorization: handlers ask ``RequestContext.authorize`` (always True without an authorizer);
  ``require`` refuses a whole request (``AuthorizationFailed``, answered with its error code).
- protocol violations (a frame over ``socket.request.max.bytes``, a bad size, an undecodable
  request) log one line naming the peer and close only this connection. A request at an API
  or version we do not serve gets ``unsupported_version``'s answer (ApiVersions: the KIP-511
  fallback; others: UNSUPPORTED_VERSION, the connection closing only when it cannot be said).
- an unexpected exception in a handler is logged with the request and answered with
  UNKNOWN_SERVER_ERROR when the response has a top-level ``error_code``; otherwise the connection
  closes. An exception anywhere else in the serve task (a codec bug) is logged and closes this
  connection, never leaving it open and unread. The broker keeps serving everyone else.
- client quotas (``strata.broker.quotas.request_quotas``): a Produce is charged its size
  before its handler (``connection_throttle.charge_arrival``); under a ``request_percentage``
  quota, a request's thread time (``RequestTime``) is charged once it is answered and encoding
  and writing it count against the next. A throttled answer goes out at once, then the
  connection handles nothing for the throttle time (KIP-219's muted channel,
  ``connection_throttle.ChannelMute``; before the client-side versions the answer waits).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import struct
import time
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from strata.broker.network.connection_throttle import ChannelMute, charge_arrival
from strata.broker.network.error_response import error_response
from strata.broker.network.listeners import ListenerSecurity
from strata.broker.network.pre_authentication import ConnectionSecurity
from strata.broker.network.request_context import RequestContext, Response
from strata.broker.network.request_queue_limit import RequestQueueLimit
from strata.broker.network.unsupported_version import unsupported_version_answer
from strata.broker.quotas.request_quotas import charge_request_time, throttle_plan
from strata.broker.security.authorization import AuthorizationFailed
from strata.protocol.codec import decode_request, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import ProtocolError, UnsupportedVersion
from strata.protocol.framing import FrameReader
from strata.protocol.header import (
    RequestHeader,
    encode_response_header,
    response_header_version,
)
from strata.storage.file_records import FileSlice, pread_fully

if TYPE_CHECKING:
    from strata.broker.broker_state import BrokerState

logger = logging.getLogger(__name__)

MAX_QUEUED_FRAMES: Final = 16
"""Frames one connection may hold decoded-but-unhandled before it stops reading."""

_SIZE: Final = struct.Struct(">i")
INLINE_SLICE_BYTES: Final = 64 * 1024
"""A file slice up to this size is read and written with its response's other bytes."""
_PEER_GONE: Final = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF})


__all__ = ["ConnectionClosed", "KafkaConnection", "RequestQueueLimit"]


class ConnectionClosed(Exception):
    """The peer went away (or we closed) while a response was being written."""


class KafkaConnection(asyncio.Protocol):
    """The Kafka protocol on one accepted socket. Created by ``KafkaServer`` per connection."""

    def __init__(self, state: BrokerState, limit: RequestQueueLimit,
                 on_close: Callable[[KafkaConnection], None],
                 listener: ListenerSecurity | None = None) -> None:
        self._state = state
        self._security = ConnectionSecurity(listener)
        self._tls = False
        self._closing_counted = False
        self._limit = limit
        self._on_close = on_close
        self._reader = FrameReader(state.config.socket_request_max_bytes)
        self._frames: collections.deque[bytes] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._peer = ("?", 0)
        self._wakeup: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._write_paused = False
        self._reading_paused = False
        self._closing = False
        self._stopping = False  # broker shutdown: finish the request in hand, then close
        self._busy = False
        self._sendfile_fd: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._mute = ChannelMute()  # quota throttles

    # ------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = typing.cast(asyncio.Transport, transport)
        if self._state.metrics is not None:
            self._state.metrics.requests.connections.inc()
        self._tls = transport.get_extra_info("ssl_object") is not None
        if not self._tls:
            # 0/0: pause_writing as soon as any byte is left unsent, resume when all are sent.
            # (uvloop's TLS transport never resumes from 0/0: it keeps its default limits.)
            self._transport.set_write_buffer_limits(high=0, low=0)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
        if self._tls:
            self._security.on_tls(transport.get_extra_info("peercert"), self.peer)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self._closing or self._stopping:
            return
        try:
            self._reader.feed(data)
            self._take_frames()
        except ProtocolError as exc:
            self._close_for(str(exc))
            return
        self._maybe_pause_reading()
        self._wake()

    def _take_frames(self) -> None:
        """Move complete frames from the reader to the queue: up to ``MAX_QUEUED_FRAMES``,
        and only the first while the broker-wide limit is full (so the reader holds a complete
        frame only while the queue holds one too, and reading is paused)."""
        frames = self._frames
        reader = self._reader
        limit = self._limit
        while len(frames) < MAX_QUEUED_FRAMES and not (frames and limit.full):
            frame = reader.next_frame()
            if frame is None:
                return
            frames.append(frame)
            limit.queued += 1

    def eof_received(self) -> bool | None:
        return False  # close our side too; requests already read are still answered

    def connection_lost(self, exc: Exception | None) -> None:
        if self._state.metrics is not None and not self._closing_counted:
            self._closing_counted = True
            self._state.metrics.requests.connections.dec()
        self._closing = True
        self._limit.forget(self)
        if self._frames:
            self._limit.release(len(self._frames))
            self._frames.clear()
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._on_close(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._maybe_pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self.maybe_resume_reading()

    # ------------------------------------------------------------ public
    @property
    def peer(self) -> str:
        return f"{self._peer[0]}:{self._peer[1]}"

    @property
    def busy(self) -> bool:
        """True while a request is being handled or its response written."""
        return self._busy

    async def stop(self) -> None:
        """Broker shutdown: read nothing more, finish the request in hand, then close."""
        self._stopping = True
        if self._transport is not None and not self._closing:
            self._transport.pause_reading()
        if self._frames:
            self._limit.release(len(self._frames))
            self._frames.clear()
        self._wake()
        if self._task is not None:
            await asyncio.shield(self._task)

    def abort(self) -> None:
        """Close at once, dropping anything unsent."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()
        if self._task is not None:
            self._task.cancel()

    def maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and not self._write_paused
            and not self._closing
            and not self._stopping
            and len(self._frames) < MAX_QUEUED_FRAMES
            and not (self._frames and self._limit.full)
            and self._transport is not None
        ):
            self._reading_paused = False
            self._limit.forget(self)
            self._transport.resume_reading()

    # ------------------------------------------------------------ flow control
    def _maybe_pause_reading(self) -> None:
        if self._reading_paused or self._transport is None or self._closing:
            return
        frames = len(self._frames)
        if self._write_paused or frames >= MAX_QUEUED_FRAMES or (frames and self._limit.full):
            self._reading_paused = True
            if self._limit.full:
                self._limit.wait(self)
            self._transport.pause_reading()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)
        if self._stopping or self._closing:
            self._mute.release()

    async def _wait_drained(self) -> None:
        """Until the transport has handed every byte to the kernel (or the peer is gone)."""
        while self._write_paused and not self._closing:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
        if self._closing:
            raise ConnectionClosed

    # ------------------------------------------------------------ the serve task
    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closing:
                if not self._frames:
                    if self._stopping:
                        break
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = self._frames.popleft()
                self._limit.release()
                try:
                    self._take_frames()  # frames read earlier and left in the reader
                except ProtocolError as exc:
                    self._close_for(str(exc))
                    break
                self.maybe_resume_reading()
                self._busy = True
                try:
                    await self._handle(frame)
                    if self._write_paused:
                        await self._wait_drained()
                finally:
                    self._busy = False
        except ConnectionClosed:
            pass
        except Exception:
            # A Strata bug outside a handler (the codec raising something it documents it
            # never raises): without this the task ends unseen and the socket stays open,
            # unread, forever.
            logger.exception("serving %s failed", self.peer)
            self._close_for("internal error while serving the connection", quiet=True)
        finally:
            if self._sendfile_fd is not None:
                os.close(self._sendfile_fd)
                self._sendfile_fd = None
            if self._stopping and not self._closing and self._transport is not None:
                self._transport.close()

    async def _handle(self, frame: bytes) -> None:
        received_ns = time.perf_counter_ns()
        state = self._state
        security = self._security
        refusal = security.refusal(frame)  # before the body is decoded
        if refusal is not None:
            self._close_for(refusal)
            return
        ranges = state.registry.version_ranges()
        try:
            request = decode_request(frame, ranges)
        except UnsupportedVersion as exc:
            answer = unsupported_version_answer(state.registry, exc, frame, ranges, self.peer)
            if answer is None:
                self._close_for(str(exc))
            elif answer:
                self._write(answer)
            return
        except ProtocolError as exc:
            self._close_for(str(exc))
            return
        header = request.header
        started = time.perf_counter()
        handler = state.registry.lookup(header.api_key, header.api_version)
        if handler is None:  # pragma: no cover - decode_request checked the same ranges
            self._close_for(f"no handler for {header.describe()}")
            return
        context = RequestContext(header, self._peer[0], self._peer[1], state,
                                 security.listener.name, security.session)
        request_time = charge_arrival(state, context, len(frame), security, received_ns)
        body: Any = None
        try:
            work = handler(context, request.body)
            result = body = await (work if request_time is None else request_time.timed(work))
            if request_time is not None:
                if result is None:  # Produce acks=0: not charged (Kafka neither)
                    request_time = None
                else:
                    result = charge_request_time(request_time, context, result)
            if result is not None and not isinstance(result, Response):
                encoding = time.perf_counter_ns()
                result = encode_response(header, result)
                if request_time is not None:
                    request_time.add(time.perf_counter_ns() - encoding)
        except asyncio.CancelledError:
            raise
        except AuthorizationFailed as exc:
            logger.info("%s from %s (%s): %s", header.describe(), self.peer,
                        context.principal, exc)
            result = error_response(header, exc.error_code)
            if result is None:
                self._close_for(f"{header.describe()} refused and has no error field")
                return
        except Exception:
            logger.exception("%s from %s failed", header.describe(), self.peer)
            result = error_response(header, ErrorCode.unknown_server_error)
            if result is None:
                self._close_for(f"{header.describe()} failed and has no error field")
                return
        metrics = state.metrics
        if metrics is not None:
            requests = metrics.requests
            requests.received_bytes.inc(len(frame) + 4)
            requests.observe(header.api_key, time.perf_counter() - started, body)
        throttle = throttle_plan(header.api_key, header.api_version, context.throttle_time_ms)
        if throttle is not None and throttle.delay_response:
            await self._mute.hold(throttle.delay_s)  # before KIP-219: the answer itself waits
        if request_time is None:
            await self._answer(header, result)
        else:  # Kafka's network-thread time: counts against the next request
            await request_time.timed(self._answer(header, result))
            request_time.finish(state.clock.milliseconds())
        if throttle is not None and not throttle.delay_response:
            await self._mute.hold(throttle.delay_s)  # KIP-219: the channel is muted

    async def _answer(self, header: RequestHeader, result: bytes | Response | None) -> None:
        """Write the answer to ``header``'s request (nothing for None: Produce acks=0)."""
        metrics = self._state.metrics
        if result is None:
            return
        if isinstance(result, bytes):
            if metrics is not None:
                metrics.requests.sent_bytes.inc(len(result))
            self._write(result)
            if self._security.failed:
                await self._close_after_failed_authentication()
            return
        if metrics is not None:
            metrics.requests.sent_bytes.inc(result.size + 4)
        try:
            await self._write_response(header, result)
        except (ConnectionClosed, asyncio.CancelledError):
            raise
        except Exception as exc:
            # Part of the frame may be out already: the stream cannot be resynchronised.
            logger.exception("writing the answer to %s failed", header.describe())
            self._close_for(f"writing a response failed: {exc}")
            raise ConnectionClosed from exc

    async def _close_after_failed_authentication(self) -> None:
        """Kafka's ``connection.failed.authentication.delay.ms``: the answer goes out, nothing
        more is handled, and the connection closes after the delay."""
        self._maybe_pause_reading()
        if self._write_paused:
            await self._wait_drained()
        await asyncio.sleep(self._security.failed_authentication_delay_s)
        self._close_for(self._security.closing_reason)
        raise ConnectionClosed

    # ------------------------------------------------------------ writing
    def _write(self, data: bytes) -> None:
        if self._closing or self._transport is None:
            raise ConnectionClosed
        self._transport.write(data)

    async def _write_response(self, header: RequestHeader, response: Response) -> None:
        header_bytes = encode_response_header(
            header.correlation_id, response_header_version(header.api_key, header.api_version)
        )
        pending: list[bytes] = [_SIZE.pack(len(header_bytes) + response.size), header_bytes]
        for chunk in response.chunks:
            if isinstance(chunk, FileSlice):
                if chunk.length <= 0:
                    continue
                if chunk.length <= INLINE_SLICE_BYTES or chunk.data is not None:
                    data = chunk.read_bytes()  # a slice may carry its bytes already
                    if len(data) == chunk.length:
                        pending.append(data)
                        continue  # else the slice path below fails it as before
                self._write(b"".join(pending))
                pending = []
                await self._send_file_slice(chunk)
            else:
                pending.append(chunk)
        if pending:
            self._write(b"".join(pending))

    async def _send_file_slice(self, piece: FileSlice) -> None:
        await self._wait_drained()
        position, remaining = piece.position, piece.length
        out = self._socket_fd_for_sendfile()
        while remaining > 0 and out is not None:
            try:
                sent = os.sendfile(out, piece.fd, position, remaining)
            except BlockingIOError:
                await self._writable(out)
                continue
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno in _PEER_GONE:
                    self._close_for(f"write failed: {exc}", quiet=True)
                    raise ConnectionClosed from exc
                logger.debug("sendfile to %s failed (%s); falling back to pread", self.peer, exc)
                break
            if sent == 0:
                break  # the file is shorter than the slice: the fallback sees the same
            position += sent
            remaining -= sent
        if remaining > 0:
            data = pread_fully(piece.fd, position, remaining)
            if len(data) < remaining:
                self._close_for(f"a file slice came up {remaining - len(data)} bytes short")
                raise ConnectionClosed
            self._write(data)
            await self._wait_drained()

    def _socket_fd_for_sendfile(self) -> int | None:
        if self._tls:
            return None  # the bytes must go through TLS: the caller preads and writes
        if self._sendfile_fd is None and self._transport is not None:
            sock = self._transport.get_extra_info("socket")
            if sock is None:
                return None
            self._sendfile_fd = os.dup(sock.fileno())
        return self._sendfile_fd

    async def _writable(self, fd: int) -> None:
        if self._closing:
            raise ConnectionClosed
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._drained = ready  # connection_lost wakes us too
        def on_writable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(fd, on_writable)
        try:
            await ready
        finally:
            loop.remove_writer(fd)
        if self._closing:
            raise ConnectionClosed

    # ------------------------------------------------------------ closing
    def _close_for(self, reason: str, *, quiet: bool = False) -> None:
        if self._closing:
            return
        if not quiet:
            logger.warning("closing connection from %s: %s", self.peer, reason)
        self._closing = True
        if self._transport is not None:
            self._transport.abort()  # a misbehaving peer may never read what is queued
        self._wake()

