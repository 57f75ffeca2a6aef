"""Request and response headers: parsed by hand, and which header version each message uses.

Owns ``RequestHeader`` and the header rules. The request header is read without kio because it
must be readable for any (api key, version), including ones kio cannot decode: an ApiVersions
request at an unknown version must still be answered (KIP-511).

Grammar (Kafka's RequestHeader.json / ResponseHeader.json)::

    RequestHeader v1  => request_api_key:INT16 request_api_version:INT16 correlation_id:INT32
                         client_id:NULLABLE_STRING
    RequestHeader v2  => the v1 fields, then TAG_BUFFER
    ResponseHeader v0 => correlation_id:INT32
    ResponseHeader v1 => correlation_id:INT32 TAG_BUFFER

``client_id`` stays an int16-length NULLABLE_STRING even in v2 (Kafka special-cases it so that
any broker can read the first 8 bytes and the client id of any request). Request header v0 (no
client id) only ever served ControlledShutdown v0, which Strata does not serve.

Version rules:

- request header v2 for flexible request versions (KIP-482), v1 otherwise;
- response header v1 for flexible versions, v0 otherwise, except ApiVersions: its response
  always uses v0, whatever the version (KIP-511), so a client that asked for a version we do not
  support can still read the correlation id and the v0 error body.

Flexibility per (api key, version) comes from kio's generated classes (``__flexible__``), never
from a second table.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from strata.protocol.api_keys import ApiKey
from strata.protocol.errors import InvalidRequest, InvalidResponse
from strata.protocol.messages import is_flexible
from strata.protocol.primitives import (
    INT16,
    INT32,
    BytesLike,
    WireFormatError,
    read_nullable_string,
    skip_tagged_fields,
    write_nullable_string,
)

FIXED_REQUEST_HEADER_BYTES: Final = 8  # api key, api version, correlation id
_FIXED: Final = struct.Struct(">hhi")
_FIXED_WITH_LENGTH: Final = struct.Struct(">hhih")  # ... and the client_id length
EMPTY_TAG_BUFFER: Final = b"\x00"


class RequestHeader(NamedTuple):
    """The fields of a request header every version shares (Kafka's names, ``request_`` dropped).

    A NamedTuple rather than a frozen dataclass: one is built per request, and a frozen
    dataclass's ``__init__`` costs several times more.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def describe(self) -> str:
        """``"Produce v8 (correlation id 7, client 'rdkafka')"``, for logs and error messages."""
        try:
            name = ApiKey(self.api_key).name
        except ValueError:
            name = f"api key {self.api_key}"
        return (
            f"{name} v{self.api_version} "
            f"(correlation id {self.correlation_id}, client {self.client_id!r})"
        )


def peek_request_header(frame: BytesLike) -> tuple[RequestHeader, int]:
    """The header fields of any request version and the offset just past ``client_id``.

    Does not read a v2 header's TAG_BUFFER: that needs the header version, which needs kio to
    know the version (``skip_request_header_tags`` does it). Raises ``InvalidRequest`` when the
    frame is shorter than the fixed part or the ``client_id`` length is negative or runs past
    the end. Invalid UTF-8 in ``client_id`` is replaced by U+FFFD, as Kafka does.
    """
    end = len(frame)
    if end >= _FIXED_WITH_LENGTH.size:
        api_key, api_version, correlation_id, length = _FIXED_WITH_LENGTH.unpack_from(frame, 0)
        offset = _FIXED_WITH_LENGTH.size
        if length == -1:
            return RequestHeader(api_key, api_version, correlation_id, None), offset
        if 0 <= length <= end - offset:
            # Like Kafka (Java's String(bytes, UTF_8)), invalid UTF-8 becomes U+FFFD.
            client_id = str(frame[offset : offset + length], "utf-8", "replace")
            header = RequestHeader(api_key, api_version, correlation_id, client_id)
            return header, offset + length
    raise _malformed_header(frame)


def _malformed_header(frame: BytesLike) -> InvalidRequest:
    """The precise error for a header ``peek_request_header`` could not read."""
    end = len(frame)
    if end < FIXED_REQUEST_HEADER_BYTES:
        return InvalidRequest(f"a {end}-byte frame is too short for a request header")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    partial = RequestHeader(api_key, api_version, correlation_id, None)
    try:
        read_nullable_string(frame, FIXED_REQUEST_HEADER_BYTES, end)
    except WireFormatError as exc:
        return InvalidRequest(f"client_id: {exc}", partial)
    return InvalidRequest("client_id: malformed", partial)  # pragma: no cover - unreachable


def skip_request_header_tags(
    frame: BytesLike, header: RequestHeader, offset: int, header_version: int
) -> int:
    """The offset of the body: past the TAG_BUFFER of a v2 header, else ``offset`` itself."""
    if header_version < 2:
        return offset
    try:
        return skip_tagged_fields(frame, offset, len(frame))
    except WireFormatError as exc:
        raise InvalidRequest(f"request header tagged fields: {exc}", header) from exc


def request_header_version(api_key: int, api_version: int) -> int:
    """1, or 2 for flexible versions. ``UnknownMessageVersion`` if kio does not know the pair."""
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0, or 1 for flexible versions; always 0 for ApiVersions (KIP-511)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def encode_request_header(header: RequestHeader, header_version: int) -> bytes:
    """The bytes of a v1 or v2 request header (used by Strata's own clients and the tests)."""
    fixed = (
        INT16.pack(header.api_key)
        + INT16.pack(header.api_version)
        + INT32.pack(header.correlation_id)
        + write_nullable_string(header.client_id)
    )
    return fixed + EMPTY_TAG_BUFFER if header_version >= 2 else fixed


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """The bytes of a v0 or v1 response header (v1 carries an empty TAG_BUFFER)."""
    fixed = INT32.pack(correlation_id)
    return fixed + EMPTY_TAG_BUFFER if header_version >= 1 else fixed


def read_response_header(frame: BytesLike, header_version: int) -> tuple[int, int]:
    """``(correlation_id, body offset)`` of a response frame; ``InvalidResponse`` if truncated."""
    end = len(frame)
    if end < 4:
        raise InvalidResponse(f"a {end}-byte frame is too short for a response header")
    (correlation_id,) = INT32.unpack_from(frame, 0)
    if header_version < 1:
        return correlation_id, 4
    try:
        return correlation_id, skip_tagged_fields(frame, 4, end)
    except WireFormatError as exc:
        raise InvalidResponse(f"response header tagged fields: {exc}") from exc
