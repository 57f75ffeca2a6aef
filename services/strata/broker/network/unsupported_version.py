"""The answer to a request at an API or version this broker does not serve.

What the connection writes when ``decode_request`` raises ``UnsupportedVersion``, in Kafka's
order of cases:

* a version that was removed but is still advertised as refused (``BrokerRegistry.refuse``):
  the registry's refusal body under a v0 response header, or nothing at all when the refusal
  is empty (the request gets no response);
* ApiVersions at a version we do not know: negotiation, not misbehaviour (KIP-511): the v0
  fallback answer with UNSUPPORTED_VERSION (error 35) and our version ranges;
* any other API or version: UNSUPPORTED_VERSION in the response's top-level error field; when
  that response has none, there is no way to say it and the connection closes.

Pure: bytes out, no I/O (one log line for the answered UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.network.error_response import error_response
from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import encode_unsupported_version_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import UnsupportedVersion
from strata.protocol.header import encode_response_header
from strata.protocol.registry import HandlerRegistry, VersionRange

logger = logging.getLogger(__name__)

_SIZE: Final = struct.Struct(">i")


def unsupported_version_answer(registry: HandlerRegistry[Any], exc: UnsupportedVersion,
                               frame: bytes, ranges: Mapping[ApiKey, VersionRange],
                               peer: str) -> bytes | None:
    """The whole response frame to write for ``exc`` (b"": write nothing), or None: the
    request cannot be answered and the connection closes."""
    from strata.broker.handlers import BrokerRegistry  # they import the connection

    refused = registry.refuse(exc.header, frame) if isinstance(registry, BrokerRegistry) \
        else None
    if refused is not None:  # a removed version, advertised: its refusal
        if not refused:
            return b""
        return (_SIZE.pack(4 + len(refused))
                + encode_response_header(exc.header.correlation_id, 0) + refused)
    if not exc.peer_misbehaved:  # ApiVersions negotiation (KIP-511)
        return encode_unsupported_version_response(exc.header, ranges)
    # A version (or API) not served: UNSUPPORTED_VERSION where it can be said.
    answer = error_response(exc.header, ErrorCode.unsupported_version)
    if answer is not None:
        logger.info("%s from %s: not served, answered UNSUPPORTED_VERSION",
                    exc.header.describe(), peer)
    return answer
