"""A blocking Kafka connection built on Strata's own codec, for tests that need exact bytes.

``KafkaWire`` sends one request at a time (``encode_request``) and reads its response frame
(``decode_response``), checking the correlation id. Requests are described version-neutrally
(``build_request``), so a test reads like the Kafka protocol guide. Every read is bounded by the
socket timeout; a closed connection raises ``ConnectionError`` with what was being waited for.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    build_request,
    decode_response,
    encode_request,
)
from strata.storage import record_batch as rb

CLIENT_ID: Final = "strata-matrix-wire"
_SIZE = struct.Struct(">i")


class KafkaWire:
    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._correlation_ids = itertools.count(1)

    @classmethod
    def to(cls, bootstrap: str, timeout: float = 5.0) -> KafkaWire:
        host, _, port = bootstrap.rpartition(":")
        return cls(host, int(port), timeout)

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: ApiKey, version: int, fields: Mapping[str, Any]) -> int:
        """Send a request without reading; returns its correlation id."""
        correlation_id = next(self._correlation_ids)
        body = build_request(api_key, version, fields)
        header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
        self.sock.sendall(encode_request(header, body))
        return correlation_id

    def request(self, api_key: ApiKey, version: int, fields: Mapping[str, Any]) -> Any:
        """Send a request and return the decoded response body (kio's dataclass)."""
        correlation_id = self.send(api_key, version, fields)
        got, body = decode_response(self.read_frame(), api_key, version)
        if got != correlation_id:
            raise AssertionError(f"response correlation id {got}, request's {correlation_id}")
        return body

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError(f"broker closed the connection ({len(chunks)}/{n} bytes)")
            chunks += chunk
        return bytes(chunks)


def api_versions(bootstrap: str, version: int = 3, timeout: float = 5.0) -> Any:
    """ApiVersions on a fresh connection: the cheapest proof that the broker still serves."""
    with KafkaWire.to(bootstrap, timeout) as wire:
        return wire.request(
            ApiKey.API_VERSIONS,
            version,
            {"client_software_name": "strata-matrix", "client_software_version": "0"},
        )


def fetch(wire: KafkaWire, topic: str, partition: int, offset: int = 0) -> Any:
    """One partition's FetchResponse v11 entry (read_uncommitted, no wait); raises on errors."""
    response = wire.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": 1 << 24,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    })
    assert response.error_code == ErrorCode.none, f"Fetch v11 {topic}: {response.error_code}"
    (topic_response,) = response.responses
    (found,) = topic_response.partitions
    assert found.error_code == ErrorCode.none, f"Fetch v11 {topic}[{partition}]: {found}"
    return found


def stored_batches(bootstrap: str, topic: str, partitions: int) -> list[rb.BatchHeader]:
    """The headers of every batch in ``topic`` as the broker serves them, partition by partition
    (one fetch each: enough for the few small batches of a test)."""
    headers: list[rb.BatchHeader] = []
    with KafkaWire.to(bootstrap) as wire:
        for partition in range(partitions):
            records = bytes(fetch(wire, topic, partition).records or b"")
            headers.extend(header for _, header in rb.iter_headers(records))
    return headers
