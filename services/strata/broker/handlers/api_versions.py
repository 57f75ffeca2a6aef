"""ApiVersions (key 18, v0-4): which APIs, versions and features this broker serves.

The list is the handler registry's ``version_ranges()`` (never typed here), encoded by
``strata.protocol.api_versions``. A request at a version we do not serve never reaches this
handler: the connection answers it with the v0 fallback and error 35 (KIP-511).

v3 requests carry ``client_software_name`` / ``client_software_version``; like Kafka, values
outside ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` get INVALID_REQUEST (with the list).

Features (KIP-584, tagged fields of v3+): ``SUPPORTED_FEATURES`` is every feature flag this
broker knows with the levels it can run: level 0 only of ``group.version`` (no KIP-848
consumer group protocol), levels 0-2 of ``transaction.version``. ``finalized_features`` lists
the ``transaction.version`` in use (the broker setting of that name, Kafka's
``kafka-features.sh`` level; 2 by default as on a new Kafka 4 cluster) when above 0 — a Java
4.x producer reads it and speaks transactions v2 (KIP-890) — with
``finalized_features_epoch`` the broker's start time in ms (Kafka: the metadata offset of the
last feature change; a client keeps the features of the highest epoch it saw, so a restart with
another level is noticed), or -1 when nothing is finalized. ``zk_migration_ready`` is false
(there is no ZooKeeper). A feature whose lowest level is 0 is listed from v4 only: v3 readers
(Java clients before 3.9) reject a range starting at 0 (KIP-1022), which is why Kafka filters
them the same way.
"""

from __future__ import annotations

import re
from typing import Any, Final

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import api_versions_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.protocol.registry import VersionRange

_SOFTWARE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

SUPPORTED_FEATURES: Final = {
    "group.version": VersionRange(0, 0),
    "transaction.version": VersionRange(0, 2),
}
"""Feature name -> the levels this broker supports (Kafka's feature names)."""

NO_FINALIZED_FEATURES_EPOCH: Final = -1
FIRST_VERSION_WITH_LEVEL_ZERO: Final = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    error = ErrorCode.none
    if version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        error = ErrorCode.invalid_request
    elif version >= 3:  # what client_software_* selectors of client-metrics match (KIP-714)
        ctx.state.client_metrics.note_client_software(
            ctx.client_host, ctx.client_port, request.client_software_name,
            request.client_software_version)
    response = api_versions_response(version, ctx.state.registry.version_ranges(),
                                     error_code=error)
    if version < 3:
        return response
    features = [{"name": name, "min_version": levels.min_version,
                 "max_version": levels.max_version}
                for name, levels in sorted(SUPPORTED_FEATURES.items())
                if levels.min_version > 0 or version >= FIRST_VERSION_WITH_LEVEL_ZERO]
    level = int(ctx.state.transaction_coordinator.config.transaction_version)
    finalized = [{"name": "transaction.version", "min_version_level": level,
                  "max_version_level": level}] if level > 0 else []
    return build_response(ApiKey.API_VERSIONS, version, {
        "error_code": response.error_code, "api_keys": response.api_keys,
        "throttle_time_ms": 0, "supported_features": features, "finalized_features": finalized,
        "finalized_features_epoch": ctx.state.started_ms if finalized
        else NO_FINALIZED_FEATURES_EPOCH,
        "zk_migration_ready": False,
    })
