"""CreateAcls (key 30, v1-3): store ACL bindings; one result per creation, in request order.

Kafka's rules: without an authorizer every creation is SECURITY_DISABLED; the caller needs
Alter on the Cluster (else every creation is CLUSTER_AUTHORIZATION_FAILED); a creation that is
not a definite binding (an ANY/UNKNOWN/MATCH field, an empty name, a principal without
``Type:``, a Cluster resource not named ``kafka-cluster``) is INVALID_REQUEST with the reason.
The valid ones are written together (``BrokerAuthorizer.create``: the metadata store in one
transaction, or ``acls.json``); creating an existing binding succeeds and changes nothing. The
answer is sent once this broker enforces the new bindings; the others follow within one
metadata watch event.

Versions: v2 is v1 in the flexible encoding; v3 allows resource type USER (7), which the
ACL model already has.
"""

from __future__ import annotations

from typing import Any

from strata.broker.handlers.describe_acls import NO_AUTHORIZER, NOT_AUTHORIZED
from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)


def _binding(creation: Any) -> AclBinding:
    binding = AclBinding(
        ResourcePattern(ResourceType.of(creation.resource_type), creation.resource_name,
                        PatternType.of(creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host,
                           AclOperation.of(creation.operation),
                           AclPermissionType.of(creation.permission_type)))
    binding.validate()
    return binding


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.state.authorizer
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    if authorizer is None:
        results = [(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(request.creations)
    elif not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        results = [(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)] * len(
            request.creations)
    else:
        for creation in request.creations:
            try:
                valid.append(_binding(creation))
            except ValueError as exc:
                results.append((ErrorCode.invalid_request, str(exc)))
            else:
                results.append((ErrorCode.none, None))
        if valid:
            await authorizer.create(valid)
    return build_response(ApiKey.CREATE_ACLS, ctx.header.api_version, {
        "throttle_time_ms": 0,
        "results": [{"error_code": code, "error_message": message} for code, message in results]})
