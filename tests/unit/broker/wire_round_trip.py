"""One request through the broker's wire path, with kio on the client side: the version tests'
harness.

``round_trip`` builds the request body with kio's class of that version, frames it (request
header v1/v2), optionally appends an unknown tagged field to a flexible body's top-level tag
buffer (a reader must skip it, as Kafka's does), then runs what ``KafkaConnection`` runs:
``decode_request`` against the broker's served ranges, the registered handler, and
``encode_response``. The response frame is parsed by kio's own reader (``entity_reader``), and
the header checked: correlation id, and the response header's tagged-field buffer for flexible
versions except ApiVersions (KIP-511: always response header v0).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.serial import entity_reader

from strata.broker.handlers import build_registry
from strata.broker.network.request_context import RequestContext
from strata.broker.server import BrokerState
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_request, encode_request, encode_response
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_request, is_flexible, response_type

CORRELATION_ID = 4242
UNKNOWN_TAG = b"\x01\x63\x03xyz"  # one tagged field: tag 99, 3 bytes


def request_frame(api_key: ApiKey, version: int, fields: dict[str, Any],
                  unknown_tag: bool = False) -> bytes:
    """The request frame payload (no size prefix) kio writes for ``fields`` at ``version``."""
    header = RequestHeader(int(api_key), version, CORRELATION_ID, "versions-test")
    frame = encode_request(header, build_request(api_key, version, fields))[4:]
    if unknown_tag:
        assert is_flexible(api_key, version) and frame.endswith(b"\x00")
        frame = frame[:-1] + UNKNOWN_TAG
    return frame


def read_response(frame: bytes, api_key: ApiKey, version: int) -> Any:
    """The response body decoded by kio's reader from a sized response frame."""
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    (correlation_id,) = struct.unpack(">i", frame[4:8])
    assert correlation_id == CORRELATION_ID
    offset = 8
    if is_flexible(api_key, version) and api_key != ApiKey.API_VERSIONS:
        assert frame[offset] == 0  # response header v1: empty tag buffer
        offset += 1
    body, size = entity_reader(response_type(api_key, version))(frame, offset)
    assert offset + size == len(frame), "bytes left after the response body"
    return body


async def round_trip(state: BrokerState, api_key: ApiKey, version: int,
                     fields: dict[str, Any], *, unknown_tag: bool = False,
                     listener: str = "PLAINTEXT") -> Any:
    """The broker's answer, as kio decodes it, to ``fields`` sent at ``version``."""
    if not state.registry:
        state.registry = build_registry()
    frame = request_frame(api_key, version, fields, unknown_tag)
    request = decode_request(frame, state.registry.version_ranges())
    handler = state.registry.lookup(api_key, version)
    assert handler is not None
    ctx = RequestContext(request.header, "127.0.0.1", 50000, state, listener=listener)
    response = await handler(ctx, request.body)
    return read_response(encode_response(request.header, response), api_key, version)
