"""Strata's sans-IO Kafka protocol codec: bytes in, typed messages out, and back.

Owns everything between the socket and the request handlers, with no I/O and no asyncio:

==================  ==========================================================================
``framing``         int32 size-prefixed frames on a byte stream (``FrameReader``)
``header``          request/response headers parsed by hand, header version rules (KIP-482/511)
``messages``        the kio adapter: message classes, body decode/encode, version-neutral builders
``prescan``         bounds checks run before kio reads a body (kio aborts on huge array counts)
``primitives``      the few wire primitives read by hand (varints, strings, tag buffers)
``codec``           ``decode_request`` / ``encode_response`` (and the client-side pair)
``registry``        api key -> (versions, handler); the source of the advertised versions
``api_versions``    ApiVersions responses and the unsupported-version fallback
``versions``        ``SUPPORTED_VERSIONS``, the version table of ARCHITECTURE.md §5
``api_keys``        ``ApiKey``, Kafka's API keys by name
``error_codes``     ``ErrorCode``, Kafka's error codes (kio's enum, re-exported)
``errors``          the exceptions, each saying whether the peer misbehaved
==================  ==========================================================================

Typical use by a connection::

    reader.feed(data)
    for frame in reader.frames():
        try:
            request = decode_request(frame, registry.version_ranges())
        except UnsupportedVersion as exc:
            if exc.peer_misbehaved:
                close()
            else:  # ApiVersions at a version we do not serve
                write(encode_unsupported_version_response(exc.header, registry.version_ranges()))
        ...
        write(encode_response(request.header, build_response(key, version, fields)))
"""

from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import (
    api_versions_response,
    encode_unsupported_version_response,
)
from strata.protocol.codec import (
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from strata.protocol.error_codes import ErrorCode, error_code_for, kafka_error_name
from strata.protocol.errors import (
    FrameTooLarge,
    InvalidFrameSize,
    InvalidRequest,
    InvalidResponse,
    MessageBuildError,
    ProtocolError,
    UnsupportedVersion,
)
from strata.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES, FrameReader, frame
from strata.protocol.header import RequestHeader
from strata.protocol.messages import (
    build_entity,
    build_request,
    build_response,
    request_type,
    response_type,
)
from strata.protocol.registry import HandlerRegistry, Registration
from strata.protocol.versions import SUPPORTED_VERSIONS, VersionRange

__all__ = [
    "DEFAULT_SOCKET_REQUEST_MAX_BYTES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "ErrorCode",
    "FrameReader",
    "FrameTooLarge",
    "HandlerRegistry",
    "InvalidFrameSize",
    "InvalidRequest",
    "InvalidResponse",
    "MessageBuildError",
    "ProtocolError",
    "Registration",
    "Request",
    "RequestHeader",
    "UnsupportedVersion",
    "VersionRange",
    "api_versions_response",
    "build_entity",
    "build_request",
    "build_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_unsupported_version_response",
    "error_code_for",
    "frame",
    "kafka_error_name",
    "request_type",
    "response_type",
]
