"""DescribeAcls (key 29, v1-3): the ACL bindings a filter selects, grouped by resource pattern.

Kafka's rules (``KafkaApis.handleDescribeAcls``): without an authorizer (no
``authorizer.class.name``) the answer is SECURITY_DISABLED; the caller needs Describe on the
Cluster (CLUSTER_AUTHORIZATION_FAILED); a filter with an UNKNOWN field is INVALID_REQUEST.
The filter's semantics are ``strata.security.acl.AclBindingFilter``'s (ANY / MATCH).
Answers come from this broker's view, which includes every write it made itself.

Versions: v2 is v1 in the flexible encoding; v3 allows resource type USER (7), which the
ACL model already has.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured on the broker"
NOT_AUTHORIZED = "Cluster authorization failed."


def acl_filter(request: Any) -> AclBindingFilter:
    """The ``AclBindingFilter`` of a DescribeAcls request or a DeleteAcls filter."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.of(request.resource_type_filter),
                              request.resource_name_filter,
                              PatternType.of(request.pattern_type_filter)),
        AccessControlEntryFilter(request.principal_filter, request.host_filter,
                                 AclOperation.of(request.operation),
                                 AclPermissionType.of(request.permission_type)))


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.state.authorizer
    error, message, resources = ErrorCode.none, None, []
    if authorizer is None:
        error, message = ErrorCode.security_disabled, NO_AUTHORIZER
    elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        error, message = ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED
    else:
        selected = acl_filter(request)
        try:
            selected.validate()
        except ValueError as exc:
            error, message = ErrorCode.invalid_request, str(exc)
        else:
            for pattern, bindings in groupby(authorizer.describe(selected),
                                             key=lambda b: b.pattern):
                resources.append({
                    "resource_type": pattern.resource_type, "resource_name": pattern.name,
                    "pattern_type": pattern.pattern_type,
                    "acls": [{"principal": b.entry.principal, "host": b.entry.host,
                              "operation": b.entry.operation,
                              "permission_type": b.entry.permission_type} for b in bindings]})
    return build_response(ApiKey.DESCRIBE_ACLS, ctx.header.api_version, {
        "throttle_time_ms": 0, "error_code": error, "error_message": message,
        "resources": resources})
