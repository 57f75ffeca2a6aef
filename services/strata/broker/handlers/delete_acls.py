"""DeleteAcls (key 31, v1-3): remove the ACL bindings each filter selects; per filter, the removed.

Kafka's rules: without an authorizer every filter is SECURITY_DISABLED; the caller needs Alter
on the Cluster (else every filter is CLUSTER_AUTHORIZATION_FAILED); a filter with an UNKNOWN
field is INVALID_REQUEST. A binding selected by two filters is listed under both and removed
once. The answer is sent once this broker no longer enforces the removed bindings.

Versions: v2 is v1 in the flexible encoding; v3 allows resource type USER (7), which the
ACL model already has.
"""

from __future__ import annotations

from typing import Any

from strata.broker.handlers.describe_acls import NO_AUTHORIZER, NOT_AUTHORIZED, acl_filter
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclBinding, AclBindingFilter, AclOperation, ResourceType


def _matching(binding: AclBinding) -> dict[str, object]:
    pattern, entry = binding.pattern, binding.entry
    return {"error_code": ErrorCode.none, "error_message": None,
            "resource_type": pattern.resource_type, "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type, "principal": entry.principal,
            "host": entry.host, "operation": entry.operation,
            "permission_type": entry.permission_type}


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.state.authorizer
    count = len(request.filters)
    results: list[dict[str, object]]
    if authorizer is None:
        results = [{"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER,
                    "matching_acls": []}] * count
    elif not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        results = [{"error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": NOT_AUTHORIZED, "matching_acls": []}] * count
    else:
        filters: list[AclBindingFilter] = []
        errors: dict[int, str] = {}
        for i, raw in enumerate(request.filters):
            selected = acl_filter(raw)
            try:
                selected.validate()
            except ValueError as exc:
                errors[i] = str(exc)
            else:
                filters.append(selected)
        matched = iter(await authorizer.delete(filters) if filters else [])
        results = []
        for i in range(count):
            if i in errors:
                results.append({"error_code": ErrorCode.invalid_request,
                                "error_message": errors[i], "matching_acls": []})
            else:
                results.append({"error_code": ErrorCode.none, "error_message": None,
                                "matching_acls": [_matching(b) for b in next(matched)]})
    return build_response(ApiKey.DELETE_ACLS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "filter_results": results})
