"""Exceptions of the protocol codec, each saying whether the peer misbehaved.

Owns the exception taxonomy of ``strata.protocol``; nothing else is raised across the package
boundary for bad input (h11's rule: an error names who broke the protocol). ``peer_misbehaved``
tells the connection what to do:

- ``True``: the bytes on the wire break the Kafka protocol or a limit we announced (a frame over
  ``socket.request.max.bytes``, a negative size, a truncated or malformed header or body, a version
  outside the ranges we advertised). Kafka's answer, and ours, is to log and close the connection.
  The one exception is ApiVersions at a version we do not support: that is ordinary version
  negotiation (KIP-511), answered with a v0 body and error 35, so for it ``peer_misbehaved`` is
  ``False`` and the connection stays open.
- ``False``: our own code handed the codec something it cannot encode (a missing field, a wrong
  type, a header that does not match the body): a Strata bug; fail the request loudly.

No wire grammar lives here (this module reads no bytes); the grammars whose violations these
errors report are in ``framing``, ``header``, ``primitives`` and ``prescan``.

Invariant: every ``ProtocolError`` raised while decoding carries enough context (the peeked
request header when one was readable) for the broker to log it and, for ApiVersions, answer it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strata.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from strata.protocol.header import RequestHeader


class ProtocolError(Exception):
    """Base class of every error the codec raises for bad bytes or bad input."""

    peer_misbehaved: bool = True


class InvalidFrameSize(ProtocolError):
    """The peer sent a negative int32 size prefix: the stream can no longer be framed."""

    def __init__(self, size: int) -> None:
        super().__init__(f"peer sent a frame with negative size {size}; closing the connection")
        self.size = size


class FrameTooLarge(ProtocolError):
    """The peer announced a frame over ``socket.request.max.bytes``; raised before buffering it.

    Kafka's ``InvalidReceiveException``: the broker closes the connection.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(
            f"peer sent a frame of {size} bytes, larger than socket.request.max.bytes={max_bytes}"
        )
        self.size = size
        self.max_bytes = max_bytes


class InvalidRequest(ProtocolError):
    """A request frame whose header or body cannot be decoded (Kafka's INVALID_REQUEST).

    ``header`` is the peeked request header when the fixed part could be read, else ``None``.
    """

    def __init__(self, detail: str, header: RequestHeader | None = None) -> None:
        super().__init__(f"peer sent an invalid request: {detail}")
        self.detail = detail
        self.header = header


class UnsupportedVersion(ProtocolError):
    """A request for an API key or version outside the ranges we advertise.

    For ApiVersions this is version negotiation, not misbehaviour: answer it with
    ``strata.protocol.api_versions.encode_unsupported_version_response``. For any other API the
    client ignored our ApiVersions answer: close the connection as Kafka does.
    """

    def __init__(self, header: RequestHeader, message: str) -> None:
        super().__init__(message)
        self.header = header
        self.peer_misbehaved = header.api_key != ApiKey.API_VERSIONS


class InvalidResponse(ProtocolError):
    """A response frame (read by our client side) that cannot be decoded: the broker misbehaved."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"peer sent an invalid response: {detail}")
        self.detail = detail


class MessageBuildError(ProtocolError, ValueError):
    """Our code asked the codec to build or encode something impossible: a Strata bug."""

    peer_misbehaved = False
