"""AlterPartitionReassignments (api key 45, v0, flexible) sent to the controller over a plain
socket with Strata's own sans-IO codec (``strata.protocol``): confluent-kafka's AdminClient has
no call for it. The operator still talks to brokers only over the Kafka protocol.

One request per call, one connection per request, bounded by ``timeout`` (connect, send and
every read). A broker that does not serve the API closes the connection without an answer, as
Kafka brokers do for an unknown api key: that is ``ReassignmentUnavailable``, which the caller
turns into "the scale-down waits". Per-partition errors come back by name (Kafka's error names).
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Mapping
from typing import Final

from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_response, encode_request
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_request

TopicPartition = tuple[str, int]

API_VERSION: Final = 0
CLIENT_ID: Final = "strata-operator"
_SIZE: Final = struct.Struct(">i")
_correlation = itertools.count(1)


class ReassignmentUnavailable(RuntimeError):
    """The controller could not be asked, or does not serve AlterPartitionReassignments."""


def build_alter_request(plan: Mapping[TopicPartition, tuple[int, ...]],
                        timeout_ms: int) -> object:
    """The kio request body moving each partition to its new replica list."""
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), replicas in sorted(plan.items()):
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "replicas": list(replicas)})
    return build_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, API_VERSION, {
        "timeout": timeout_ms,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ReassignmentUnavailable("the broker closed the connection without an answer "
                                          "(AlterPartitionReassignments not served?)")
        chunks += chunk
    return bytes(chunks)


def alter_partition_reassignments(host: str, port: int,
                                  plan: Mapping[TopicPartition, tuple[int, ...]],
                                  timeout: float) -> dict[TopicPartition, str]:
    """Send the plan to the controller at ``host:port``; returns the error name per partition
    that was refused (empty: all accepted). A top-level error applies to every partition."""
    correlation_id = next(_correlation)
    header = RequestHeader(int(ApiKey.ALTER_PARTITION_REASSIGNMENTS), API_VERSION,
                           correlation_id, CLIENT_ID)
    frame = encode_request(header, build_alter_request(plan, int(timeout * 1000)))
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            (size,) = _SIZE.unpack(_read_exactly(sock, 4))
            payload = _read_exactly(sock, size)
    except OSError as exc:
        raise ReassignmentUnavailable(f"controller {host}:{port}: {exc}") from None
    answered_id, body = decode_response(payload, int(ApiKey.ALTER_PARTITION_REASSIGNMENTS),
                                        API_VERSION)
    if answered_id != correlation_id:
        raise ReassignmentUnavailable(f"answer to correlation id {answered_id}, "
                                      f"expected {correlation_id}")
    if int(body.error_code) != 0:
        name = body.error_code.name.upper()
        return {tp: name for tp in plan}
    return {(str(t.name), int(p.partition_index)): p.error_code.name.upper()
            for t in body.responses for p in t.partitions if int(p.error_code) != 0}
