"""ApiVersions (key 18, v0-3): which APIs and versions this broker serves.

The list is the handler registry's ``version_ranges()`` (never typed here), encoded by
``strata.protocol.api_versions``. A request at a version we do not serve never reaches this
handler: the connection answers it with the v0 fallback and error 35 (KIP-511).

v3 requests carry ``client_software_name`` / ``client_software_version``; like Kafka, values
outside ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` get INVALID_REQUEST (with the list).
"""

from __future__ import annotations

import re
from typing import Any, Final

from strata.broker.network.connection import RequestContext
from strata.protocol.api_versions import api_versions_response
from strata.protocol.error_codes import ErrorCode

_SOFTWARE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    error = ErrorCode.none
    if version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        error = ErrorCode.invalid_request
    return api_versions_response(version, ctx.state.registry.version_ranges(), error_code=error)
