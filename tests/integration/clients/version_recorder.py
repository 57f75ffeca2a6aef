"""A loopback TCP relay in front of a broker that records the (api key, version) of every request.

What a client negotiated is read off the wire, not out of a client's logs: the broker advertises
the relay's port (``advertised.listeners``), so every connection a client opens, bootstrap and
per-node alike, goes through it. Client to broker, the relay reads whole frames
(``Size:INT32`` then the request header's ``api_key:INT16 api_version:INT16``) and forwards them
unchanged; broker to client it copies bytes. One thread pair per connection, all daemons;
``close()`` stops accepting and shuts every socket. ``requests`` is appended to by the relay
threads only (list appends are atomic); tests read it after the client call returned.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterable

from strata.protocol.api_keys import ApiKey


class VersionRecorder:
    """Relay 127.0.0.1:``port`` to the broker at ``target_port`` (set before clients connect)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.target_port: int | None = None
        self.requests: list[tuple[int, int]] = []
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def versions(self, api_keys: Iterable[ApiKey]) -> dict[str, set[int]]:
        """API name -> every version a request of it was sent with (since the last clear)."""
        wanted = {int(key): key.name for key in api_keys}
        out: dict[str, set[int]] = {}
        for api_key, version in list(self.requests):
            if api_key in wanted:
                out.setdefault(wanted[api_key], set()).add(version)
        return out

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            _shut(sock)
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            assert self.target_port is not None, "set target_port before clients connect"
            broker = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            broker.settimeout(None)
            self._sockets += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._copy, args=(broker, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        buffer = b""
        try:
            while chunk := source.recv(65536):
                buffer += chunk
                while len(buffer) >= 8:
                    (size,) = struct.unpack_from(">i", buffer)
                    if len(buffer) < 4 + size:
                        break
                    self.requests.append(struct.unpack_from(">hh", buffer, 4))
                    sink.sendall(buffer[:4 + size])
                    buffer = buffer[4 + size:]
        except OSError:
            pass
        finally:
            _shut(sink)

    @staticmethod
    def _copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _shut(sink)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already shut by the other direction
        sock.shutdown(socket.SHUT_RDWR)
