"""``RequestTap``: a TCP relay in front of one broker that records every request's version.

Start the tap, then a broker advertising the tap's address (``advertised_listener``): a client
bootstrapped at the tap learns only that address (Metadata, FindCoordinator), so every
connection it opens — bootstrap, coordinator, fetch — goes through the tap. Each client-to-broker
byte stream is cut into Kafka frames (INT32 size + body) and each request header's api key,
api version and client id recorded; bytes are relayed unchanged both ways. What a client
negotiated is then read off the wire, whatever the client library logs.

Threads: one accepting, two per connection (one each way); all daemon threads, bounded by
``close()`` (the sockets are shut down, blocking reads return). Every socket is on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import defaultdict
from typing import Final

ACCEPT_POLL_S: Final = 0.2
CHUNK: Final = 65536
_SIZE: Final = struct.Struct(">i")
_FIXED: Final = struct.Struct(">hhih")  # api key, api version, correlation id, client id length


class RequestTap:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self._target: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._seen: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        self._sockets: list[socket.socket] = []
        self._closing = threading.Event()

    @property
    def advertised_listener(self) -> str:
        return f"PLAINTEXT://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, broker_port: int) -> None:
        self._target = ("127.0.0.1", broker_port)
        threading.Thread(target=self._accept, name="tap-accept", daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def versions(self, client_id: str) -> dict[int, set[int]]:
        """api key -> every version ``client_id`` sent of it, so far."""
        with self._lock:
            return {key: set(versions) for key, versions in self._seen[client_id].items()}

    # ----------------------------------------------------------------------------- relaying
    def _accept(self) -> None:
        assert self._target is not None
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client, False),
                             daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        pending = b""
        try:
            while chunk := source.recv(CHUNK):
                if requests:
                    pending = self._record(pending + chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _record(self, data: bytes) -> bytes:
        """Record every whole request frame in ``data``; return the incomplete rest."""
        while len(data) >= _SIZE.size:
            (size,) = _SIZE.unpack_from(data)
            if len(data) < _SIZE.size + size:
                break
            frame = data[_SIZE.size:_SIZE.size + size]
            data = data[_SIZE.size + size:]
            if len(frame) < _FIXED.size:
                continue
            api_key, api_version, _correlation_id, length = _FIXED.unpack_from(frame)
            client_id = frame[_FIXED.size:_FIXED.size + max(length, 0)].decode(errors="replace")
            with self._lock:
                self._seen[client_id][api_key].add(api_version)
        return data
