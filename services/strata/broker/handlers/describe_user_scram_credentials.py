"""DescribeUserScramCredentials (key 50, v0, flexible): which SCRAM mechanisms each user has.

Reads the broker's credential store (``BrokerState.credentials``): the metadata store in a
cluster, ``credentials.json`` for a single broker. ``users`` null or empty lists every user;
a named user without credentials is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE
(Kafka's answers). Only mechanism and iteration count are reported, never salts or keys.
Authorization (Describe on the cluster) comes with the ACL slice.

Authorization: Describe on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.security.scram import MECHANISM_TYPES

_TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}


async def handle(ctx: RequestContext, request: Any) -> Any:
    ctx.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    store = ctx.state.credentials
    results: list[dict[str, Any]] = []
    all_users = await store.users() if store is not None else {}
    names = [u.name for u in request.users or ()]
    counts = Counter(names)
    for name in dict.fromkeys(names) if names else all_users:
        result: dict[str, Any] = {"user": name, "error_code": ErrorCode.none,
                                  "error_message": None, "credential_infos": []}
        if counts[name] > 1:
            result.update(error_code=ErrorCode.duplicate_resource,
                          error_message=f"Cannot describe SCRAM credentials for the same user "
                                        f"twice in a single request: {name}")
        elif name not in all_users:
            result.update(error_code=ErrorCode.resource_not_found,
                          error_message=f"Attempt to describe a user credential that does not "
                                        f"exist: {name}")
        else:
            assert store is not None
            for mechanism in all_users[name]:
                credential = await store.get(mechanism, name)
                if credential is not None:
                    result["credential_infos"].append(
                        {"mechanism": _TYPE_OF[mechanism], "iterations": credential.iterations})
        results.append(result)
    return build_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.header.api_version, {
        "throttle_time_ms": 0, "error_code": ErrorCode.none, "error_message": None,
        "results": results})
