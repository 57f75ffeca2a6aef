"""GetTelemetrySubscriptions (key 71, v0, flexible): what a client pushes, how often (KIP-714).

A client asks with its client instance id (zero on its first request, when the broker assigns
one) and learns its subscription: the subscription id to quote in PushTelemetry, the metric
prefixes requested (empty: push nothing; ``*``: everything), the push interval, the
compression types accepted, ``telemetry.max.bytes`` and delta temporality. The decisions
(assignment, matching, THROTTLING_QUOTA_EXCEEDED before an interval has passed) are
``strata.broker.telemetry.client_metrics_manager``'s; this module only maps them onto the wire.
"""

from __future__ import annotations

import uuid
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.telemetry.client_metrics_manager import ClientConnection
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response


def connection(ctx: RequestContext) -> ClientConnection:
    """The requester as the subscriptions' ``match`` selectors see it."""
    return ClientConnection(ctx.header.client_id, ctx.client_host, ctx.client_port)


async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = ctx.state.client_metrics.get_subscriptions(request.client_instance_id,
                                                        connection(ctx))
    answered = answer.error == "NONE"
    return build_response(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "error_code": ErrorCode[answer.error.lower()],
        "client_instance_id": answer.client_instance_id if answered else uuid.UUID(int=0),
        "subscription_id": answer.subscription_id,
        "accepted_compression_types": list(answer.accepted_compression_types),
        "push_interval_ms": answer.push_interval_ms,
        "telemetry_max_bytes": answer.telemetry_max_bytes,
        "delta_temporality": answer.delta_temporality,
        "requested_metrics": list(answer.requested_metrics),
    })
