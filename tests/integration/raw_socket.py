"""Raw Kafka frames over a blocking socket, for tests that speak to the broker below any client.

A frame is a 4-byte big-endian size and that many bytes (Kafka's framing). ``read_exactly``
and ``read_frame`` are bounded by the socket's timeout and raise ``ConnectionError`` when the
broker closes the connection first; ``closed_by_broker`` tells a closed connection (EOF or a
reset) from one that sends something.
"""

from __future__ import annotations

import socket
import struct

_SIZE = struct.Struct(">i")


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(read_exactly(sock, 4))
    return read_exactly(sock, size)


def closed_by_broker(sock: socket.socket) -> bool:
    """True when the broker closes the connection without sending a byte."""
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True
