"""DescribeClientQuotas (key 48, v0-1; flexible from v1): the quotas of the entities a filter
matches (KIP-546).

What ``kafka-configs.sh --describe --entity-type users|clients``, the Java admin client's
``describeClientQuotas``, kafka-python's ``describe_client_quotas`` and ``strata quotas``
ask. The filter's components (entity type, match type exact / default / specified, and the
name for exact) and ``strict`` are matched as Kafka's metadata image matches them
(``strata.broker.quotas.client_quotas``); the answer is the configuration this broker
enforces. A bad filter is INVALID_REQUEST (an unknown entity type UNSUPPORTED_VERSION) with
Kafka's message and no entries.

Authorization: DescribeConfigs on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.quotas.client_quotas import FilterComponent, QuotaRequestError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode, error_code_for
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version

    def refused(error_code: ErrorCode, message: str) -> Any:
        return build_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, throttle_time_ms=0,
                              error_code=error_code, error_message=message, entries=None)

    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return refused(ErrorCode.cluster_authorization_failed,
                       "DescribeConfigs on the cluster is required")
    quotas = ctx.state.quotas
    assert quotas is not None, "KafkaServer.start opens the broker's quotas"
    components = [FilterComponent(c.entity_type, c.match_type, c.match)
                  for c in request.components]
    try:
        matched = quotas.describe(components, bool(request.strict))
    except QuotaRequestError as exc:
        return refused(error_code_for(exc.error_name), str(exc))
    entries = [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
               for entity, values in matched]
    return build_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, throttle_time_ms=0,
                          error_code=ErrorCode.none, error_message=None, entries=entries)
