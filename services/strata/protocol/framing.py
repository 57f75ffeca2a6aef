"""Kafka's frame layer: size-prefixed messages on a byte stream, sans-IO.

Grammar (every request and response on a Kafka connection)::

    Frame   => Size Payload
    Size    => int32, big-endian, the number of bytes of Payload (not counting itself)
    Payload => Size bytes: a request or response header followed by its body

Owns ``FrameReader``, which the connection feeds with whatever the socket returned and pulls
complete payloads from, and ``frame`` for the write side. No I/O, no asyncio.

Invariants of ``FrameReader``:

- a size over ``max_frame_bytes`` (Kafka's ``socket.request.max.bytes``, default 104857600)
  raises ``FrameTooLarge`` as soon as its 4 size bytes are in, before any more of that body is
  buffered; a negative size raises ``InvalidFrameSize``. Both mean the stream can no longer be
  framed: the reader stays failed (every later call re-raises) and the connection must close.
- a size of 0 is a valid, empty frame (the header decoder rejects it, as Kafka does).
- cost is linear in the bytes fed: consumed frames are dropped by moving a start index; the
  unconsumed tail is compacted at most once per ``feed``, so a large frame arriving in many small
  reads is never copied again and again, and many small frames in one read are sliced in place.
  Each returned payload is copied exactly once out of the buffer (as immutable ``bytes``).

Only the owner of the connection calls the reader; it has no locks.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NoReturn

from strata.protocol.errors import FrameTooLarge, InvalidFrameSize, ProtocolError

DEFAULT_SOCKET_REQUEST_MAX_BYTES: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes``: the largest request frame a broker accepts."""

SIZE_PREFIX_BYTES: Final = 4
_SIZE = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its int32 size prefix, ready to write to the socket."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameReader:
    """Splits a byte stream into Kafka frames: ``feed(data)``, then ``next_frame()`` until None."""

    __slots__ = ("_buffer", "_error", "_max_frame_bytes", "_next_size", "_start")

    def __init__(self, max_frame_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # first unconsumed byte of _buffer
        self._next_size: int | None = None  # validated size of the frame at _start, once known
        self._error: ProtocolError | None = None

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes fed but not yet returned in a frame (for back pressure and diagnostics)."""
        return len(self._buffer) - self._start

    @property
    def at_frame_boundary(self) -> bool:
        """True when no partial frame is buffered: the peer may close here without losing data."""
        return self.buffered_bytes == 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the socket.

        Raises ``FrameTooLarge`` / ``InvalidFrameSize`` if the next frame's size prefix is
        complete and invalid (later frames' prefixes are checked by ``next_frame``).
        """
        if self._error is not None:
            raise self._error
        if self._start:
            # Drop consumed frames; the tail kept is at most one partial frame, once per feed.
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data
        if self._next_size is None:
            self._read_size()

    def next_frame(self) -> bytes | None:
        """The next complete payload (without its size prefix), or None until more is fed."""
        if self._error is not None:
            raise self._error
        size = self._next_size if self._next_size is not None else self._read_size()
        if size is None:
            return None
        begin = self._start + SIZE_PREFIX_BYTES
        end = begin + size
        if len(self._buffer) < end:
            return None
        # One copy: a bytearray slice would be a copy of its own before bytes() copied it again.
        # The view is released before the buffer is resized below.
        with memoryview(self._buffer) as view:
            payload = bytes(view[begin:end])
        self._next_size = None
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        else:
            self._start = end
        return payload

    def frames(self) -> Iterator[bytes]:
        """Every complete payload buffered now, in order."""
        while (payload := self.next_frame()) is not None:
            yield payload

    def _read_size(self) -> int | None:
        """Read and validate the size prefix at ``_start``; None while fewer than 4 bytes."""
        if len(self._buffer) - self._start < SIZE_PREFIX_BYTES:
            return None
        size: int = _SIZE.unpack_from(self._buffer, self._start)[0]
        if size < 0:
            self._fail(InvalidFrameSize(size))
        if size > self._max_frame_bytes:
            self._fail(FrameTooLarge(size, self._max_frame_bytes))
        self._next_size = size
        return size

    def _fail(self, error: ProtocolError) -> NoReturn:
        self._error = error
        self._buffer = bytearray()  # the stream is unusable; release its memory now
        self._start = 0
        raise error
