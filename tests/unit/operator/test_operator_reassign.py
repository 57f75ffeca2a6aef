"""AlterPartitionReassignments as the operator sends it (``reassign.py``), against a stand-in
controller on loopback that decodes the requests (ApiVersions, then the reassignment) and
encodes its answers with Strata's own codec: the request carries the plan; accepted, refused,
unadvertised and unserved answers are told apart. (Logged in over TLS and SASL against a real
broker: ``tests/integration/security/test_operator_reassign.py``.)"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from strata.operator.reassign import (
    ReassignmentNotServed,
    ReassignmentUnavailable,
    alter_partition_reassignments,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_request, encode_response
from strata.protocol.messages import build_response
from strata.protocol.registry import VersionRange

KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
PLAN = {("orders", 0): (0, 1), ("orders", 2): (1, 0), ("audit", 0): (0,)}
SERVED = {KEY: VersionRange(0, 0), ApiKey.API_VERSIONS: VersionRange(0, 0)}


def api_versions(advertised: bool) -> Any:
    keys = [ApiKey.METADATA, *([KEY] if advertised else [])]
    return build_response(ApiKey.API_VERSIONS, 0, {"error_code": 0, "api_keys": [
        {"api_key": int(k), "min_version": 0, "max_version": 0} for k in keys]})


@contextmanager
def controller(answer: Callable[[Any], Any | None],
               advertised: bool = True) -> Iterator[tuple[int, list[Any]]]:
    """A one-connection server: answers ApiVersions (advertising the API or not), then decodes
    one request and answers ``answer(body)`` or, for None, closes the connection (what a broker
    does with an api key it does not serve)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    seen: list[Any] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
            first = decode_request(conn.recv(size, socket.MSG_WAITALL), SERVED)
            assert first.header.api_key == ApiKey.API_VERSIONS
            conn.sendall(encode_response(first.header, api_versions(advertised)))
            if not advertised:
                return
            (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
            request = decode_request(conn.recv(size, socket.MSG_WAITALL), SERVED)
            seen.append(request.body)
            body = answer(request.body)
            if body is not None:
                conn.sendall(encode_response(request.header, body))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], seen
    finally:
        thread.join(10)
        listener.close()


def response(errors: dict[tuple[str, int], int], top: int = 0) -> Callable[[Any], Any]:
    def build(request: Any) -> Any:
        return build_response(KEY, 0, {
            "throttle_time": 0, "error_code": top, "error_message": None,
            "responses": [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": errors.get((t.name, p.partition_index), 0),
                 "error_message": None} for p in t.partitions]} for t in request.topics]})
    return build


def test_the_plan_is_sent_and_accepted() -> None:
    with controller(response({})) as (port, seen):
        assert alter_partition_reassignments("127.0.0.1", port, PLAN, 5.0) == {}
    [request] = seen
    sent = {(t.name, p.partition_index): tuple(p.replicas) for t in request.topics
            for p in t.partitions}
    assert sent == PLAN
    assert request.timeout.total_seconds() == 5.0


def test_refused_partitions_come_back_by_error_name() -> None:
    with controller(response({("orders", 2): 39})) as (port, _):
        refused = alter_partition_reassignments("127.0.0.1", port, PLAN, 5.0)
    assert refused == {("orders", 2): "INVALID_REPLICA_ASSIGNMENT"}
    with controller(response({}, top=41)) as (port, _):
        refused = alter_partition_reassignments("127.0.0.1", port, PLAN, 5.0)
    assert refused == {tp: "NOT_CONTROLLER" for tp in PLAN}


def test_a_broker_without_the_api_is_not_served_not_an_error() -> None:
    with controller(lambda body: None) as (port, _), pytest.raises(
            ReassignmentNotServed, match="closed the connection without an answer"):
        alter_partition_reassignments("127.0.0.1", port, PLAN, 5.0)
    with controller(lambda body: None, advertised=False) as (port, seen), pytest.raises(
            ReassignmentNotServed, match="does not advertise AlterPartitionReassignments"):
        alter_partition_reassignments("127.0.0.1", port, PLAN, 5.0)
    assert seen == []  # not even sent


def test_an_unreachable_controller_or_unusable_settings_are_unavailable() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(ReassignmentUnavailable, match=f"127.0.0.1:{port}") as caught:
        alter_partition_reassignments("127.0.0.1", port, PLAN, 2.0)
    assert not isinstance(caught.value, ReassignmentNotServed)
    with pytest.raises(ReassignmentUnavailable, match=r"sasl\.mechanism=GSSAPI"):
        alter_partition_reassignments("127.0.0.1", port, PLAN, 2.0,
                                      {"security.protocol": "SASL_PLAINTEXT"})
