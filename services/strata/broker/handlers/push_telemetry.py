"""PushTelemetry (key 72, v0, flexible): a client's metrics, OTLP-encoded (KIP-714).

The checks (instance id, terminating, push interval, subscription id, compression type,
``telemetry.max.bytes``), the decoding and the export to ``/metrics`` are
``strata.broker.telemetry``'s (``client_metrics_manager``, ``otlp``,
``client_metrics_collector``); this module maps the answer onto the wire: one error code, no
throttle (a too-early push is THROTTLING_QUOTA_EXCEEDED, as Kafka answers it).
"""

from __future__ import annotations

from typing import Any

from strata.broker.handlers.get_telemetry_subscriptions import connection
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response


async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = ctx.state.client_metrics.push(
        request.client_instance_id, int(request.subscription_id), bool(request.terminating),
        int(request.compression_type), bytes(request.metrics), connection(ctx))
    return build_response(ApiKey.PUSH_TELEMETRY, ctx.header.api_version, {
        "throttle_time_ms": 0, "error_code": ErrorCode[answer.error.lower()]})
