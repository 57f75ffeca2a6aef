"""The codec's front door: one request frame in, one response frame out. Sans-IO.

Owns the order of operations on a frame; the pieces live in ``header``, ``messages``,
``prescan`` and ``framing``. Grammar of the payloads handled here (the frame's size prefix is
stripped by ``FrameReader`` on the way in and added by ``encode_response`` on the way out)::

    request frame payload  => RequestHeader(v1|v2) RequestBody(api key, api version)
    response frame         => Size:INT32 ResponseHeader(v0|v1) ResponseBody(api key, version)

``decode_request`` steps, each with its own error:

1. peek the header by hand (``InvalidRequest`` if the frame is shorter than the fixed part);
2. check (api key, version) against the served ranges, by default the version table
   ``SUPPORTED_VERSIONS``; the broker passes ``registry.version_ranges()``
   (``UnsupportedVersion``, carrying the header: for ApiVersions answer it with
   ``api_versions.encode_unsupported_version_response``; for anything else close);
3. skip the v2 header's tagged fields, pre-scan and decode the body with kio, requiring it to end
   exactly at the end of the frame (``InvalidRequest``, carrying the header).

``encode_response`` checks the body matches the request (api key and version; a mismatch is a
Strata bug, ``MessageBuildError``) and picks the response header version (``header`` module).
The client-side pair, ``encode_request`` / ``decode_response``, serves Strata's own clients
(admin service, tests) and follows the same rules, including the KIP-511 ApiVersions fallback.
"""

from __future__ import annotations

import io
import typing
from collections.abc import Mapping
from typing import Any, NamedTuple

from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import (
    InvalidRequest,
    InvalidResponse,
    MessageBuildError,
    UnsupportedVersion,
)
from strata.protocol.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    peek_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    skip_request_header_tags,
)
from strata.protocol.messages import (
    UnknownMessageVersion,
    decode_request_body,
    decode_response_body,
    write_body,
)
from strata.protocol.primitives import INT16, INT32, BytesLike
from strata.protocol.versions import SUPPORTED_VERSIONS, VersionRange

_SIZE_PLACEHOLDER = b"\x00\x00\x00\x00"


class Request(NamedTuple):
    """A decoded request: the header and kio's body dataclass for its (api key, version)."""

    header: RequestHeader
    body: Any


def decode_request(
    frame: BytesLike, supported: Mapping[ApiKey, VersionRange] = SUPPORTED_VERSIONS
) -> Request:
    """Decode one request frame payload (without its size prefix).

    Raises ``UnsupportedVersion`` for an api key or version outside ``supported`` and
    ``InvalidRequest`` for a malformed header or body; nothing else for any input bytes.
    """
    header, offset = peek_request_header(frame)
    # ApiKey is an IntEnum: a plain int finds its entry, and an unknown key simply misses.
    served = typing.cast(Mapping[int, VersionRange], supported).get(header.api_key)
    if served is None:
        raise UnsupportedVersion(
            header, f"peer sent {header.describe()}: api key {header.api_key} is not served"
        )
    if header.api_version not in served:
        raise UnsupportedVersion(
            header, f"peer sent {header.describe()}: served versions are {served}"
        )
    try:
        header_version = request_header_version(header.api_key, header.api_version)
    except UnknownMessageVersion:
        # Only reachable when ``supported`` lists a version kio lacks (the registry forbids it).
        raise UnsupportedVersion(
            header, f"peer sent {header.describe()}: no message class for this version"
        ) from None
    offset = skip_request_header_tags(frame, header, offset, header_version)
    try:
        body = decode_request_body(header.api_key, header.api_version, frame, offset)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{header.describe()}: {exc.detail}", header) from exc
    return Request(header, body)


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """The response frame (size prefix included) answering the request with ``header``.

    ``body`` is the kio response dataclass of the request's api key and version (see
    ``messages.build_response``).
    """
    api_key, api_version = _payload_identity(body)
    if (api_key, api_version) != (header.api_key, header.api_version):
        raise MessageBuildError(
            f"response body is api key {api_key} v{api_version}, "
            f"the request was {header.describe()}"
        )
    return encode_response_frame(
        header.correlation_id, response_header_version(api_key, api_version), body
    )


def encode_response_frame(correlation_id: int, header_version: int, body: Any) -> bytes:
    """Size prefix + response header of ``header_version`` + ``body``: no consistency checks.

    For the ApiVersions fallback, whose v0 body answers a request of another version.
    """
    out = io.BytesIO()
    out.write(_SIZE_PLACEHOLDER)
    out.write(encode_response_header(correlation_id, header_version))
    write_body(out, body)
    return _patch_size(out)


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """The request frame (size prefix included) for ``header`` and its kio request ``body``."""
    api_key, api_version = _payload_identity(body)
    if (api_key, api_version) != (header.api_key, header.api_version):
        raise MessageBuildError(
            f"request body is api key {api_key} v{api_version}, the header says "
            f"{header.describe()}"
        )
    out = io.BytesIO()
    out.write(_SIZE_PLACEHOLDER)
    out.write(encode_request_header(header, request_header_version(api_key, api_version)))
    write_body(out, body)
    return _patch_size(out)


def decode_response(frame: BytesLike, api_key: int, api_version: int) -> tuple[int, Any]:
    """``(correlation_id, body)`` of a response frame payload for a request we sent.

    An ApiVersions response with error UNSUPPORTED_VERSION is decoded as v0 whatever was asked
    (KIP-511: a broker that does not support our version answers with a v0 body); one with
    another error (INVALID_REQUEST for a bad ``client_software_name``) is of the version asked,
    and like Kafka's ``ApiVersionsResponse.parse`` we fall back to v0 only if it does not parse.
    Raises ``InvalidResponse`` for malformed bytes.
    """
    try:
        header_version = response_header_version(api_key, api_version)
    except UnknownMessageVersion as exc:
        raise MessageBuildError(f"cannot decode responses of {exc}") from None
    correlation_id, offset = read_response_header(frame, header_version)
    if api_key == ApiKey.API_VERSIONS and api_version > 0 and len(frame) >= offset + 2:
        (error_code,) = INT16.unpack_from(frame, offset)
        if error_code == ErrorCode.unsupported_version:
            api_version = 0
        elif error_code != 0:
            try:
                return correlation_id, decode_response_body(api_key, api_version, frame, offset)
            except InvalidResponse:
                api_version = 0
    try:
        return correlation_id, decode_response_body(api_key, api_version, frame, offset)
    except InvalidResponse as exc:
        raise InvalidResponse(f"correlation id {correlation_id}: {exc.detail}") from exc


def _payload_identity(body: Any) -> tuple[int, int]:
    try:
        return int(body.__api_key__), int(body.__version__)
    except AttributeError:
        raise MessageBuildError(f"not a kio message payload: {type(body).__name__}") from None


def _patch_size(out: io.BytesIO) -> bytes:
    """Write the frame size over the placeholder in place, then take the bytes (one copy)."""
    with out.getbuffer() as view:
        INT32.pack_into(view, 0, len(view) - 4)
    return out.getvalue()
