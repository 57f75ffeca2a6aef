"""ApiVersions answers: the normal response (v0-v3) and the unsupported-version fallback.

Owns the ApiVersions rule (KIP-511). Every client sends ApiVersions first,
at the highest version it knows (librdkafka v3, kafka-python and Java 4.x v4); the broker may not
know that version, so:

- a request for an ApiVersions version we serve gets the response of that version, listing
  every served API (``api_versions_response``); v3 is flexible in its body, kio encodes it;
- a request for an ApiVersions version we do *not* serve gets a **v0 body** with error
  UNSUPPORTED_VERSION (35) and our full list (``encode_unsupported_version_response``), with
  response header v0 as every ApiVersions response. Clients then retry with a version from the
  list (librdkafka v0, kafka-python v2). Kafka itself lists only its ApiVersions entry there;
  the full list is a superset every client reads the same way.

Grammar of the fallback frame (what a v0 reader decodes)::

    Size:INT32 correlation_id:INT32 error_code:INT16=35
    api_keys:ARRAY(api_key:INT16 min_version:INT16 max_version:INT16)

The advertised list is never typed here: it is the ``ranges`` argument, the broker's
``HandlerRegistry.version_ranges()`` (each api key listed once, sorted by key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import encode_response_frame
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_response
from strata.protocol.registry import VersionRange

FALLBACK_VERSION = 0
FALLBACK_HEADER_VERSION = 0


def api_versions_response(
    api_version: int,
    ranges: Mapping[ApiKey, VersionRange],
    *,
    error_code: int = ErrorCode.none,
    throttle_time_ms: int = 0,
) -> Any:
    """The kio ApiVersionsResponse body of ``api_version`` advertising ``ranges``."""
    entries = [
        {"api_key": key, "min_version": served.min_version, "max_version": served.max_version}
        for key, served in sorted(ranges.items())
    ]
    return build_response(
        ApiKey.API_VERSIONS,
        api_version,
        {"error_code": error_code, "api_keys": entries, "throttle_time_ms": throttle_time_ms},
    )


def encode_unsupported_version_response(
    header: RequestHeader, ranges: Mapping[ApiKey, VersionRange]
) -> bytes:
    """The whole frame answering an ApiVersions request at a version we do not serve."""
    if header.api_key != ApiKey.API_VERSIONS:
        raise ValueError(f"only ApiVersions gets a version fallback, not {header.describe()}")
    body = api_versions_response(
        FALLBACK_VERSION, ranges, error_code=ErrorCode.unsupported_version
    )
    return encode_response_frame(header.correlation_id, FALLBACK_HEADER_VERSION, body)
