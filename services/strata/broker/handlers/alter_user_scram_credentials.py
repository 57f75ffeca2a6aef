"""AlterUserScramCredentials (key 51, v0, flexible): create, replace or delete SCRAM credentials.

Kafka's admin clients salt and iterate the password themselves and send ``salted_password``;
the broker derives StoredKey and ServerKey from it and stores only those
(``strata.security.scram.credential_from_salted_password``), where ``strata users``
writes (``BrokerState.credentials``). Per user, Kafka's refusals: a user named in more than one
change for the same mechanism, or in both a deletion and an upsertion, DUPLICATE_RESOURCE; an
unknown mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384, an empty name or an
empty salt/salted password UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
RESOURCE_NOT_FOUND. Authorization (Alter on the cluster) comes with the ACL slice.

Authorization: Alter on the Cluster, else CLUSTER_AUTHORIZATION_FAILED for every user.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    credential_from_salted_password,
)


def _refusal(change: Any, duplicates: Counter[tuple[str, int]]) -> tuple[ErrorCode, str] | None:
    if duplicates[(change.name, int(change.mechanism))] > 1:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice"
    if int(change.mechanism) not in MECHANISM_TYPES:
        return ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {change.mechanism}"
    if not change.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    store = ctx.state.credentials
    changes = [*request.deletions, *request.upsertions]
    duplicates = Counter((c.name, int(c.mechanism)) for c in changes)
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        errors = {c.name: (ErrorCode.cluster_authorization_failed, None) for c in changes}
    for change in changes:
        refusal = _refusal(change, duplicates)
        if refusal is None and store is None:
            refusal = ErrorCode.unacceptable_credential, "This broker has no credential store"
        if refusal is not None:
            errors.setdefault(change.name, refusal)
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        if not MIN_ITERATIONS <= upsertion.iterations <= MAX_ITERATIONS:
            errors[upsertion.name] = (ErrorCode.unacceptable_credential,
                                      f"Iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        elif not upsertion.salt or not upsertion.salted_password:
            errors[upsertion.name] = (ErrorCode.unacceptable_credential,
                                      "Salt and salted password must not be empty")
    assert store is not None or all(c.name in errors for c in changes)
    for deletion in request.deletions:
        if deletion.name in errors or store is None:
            continue
        mechanism = MECHANISM_TYPES[int(deletion.mechanism)]
        if not await store.delete(deletion.name, mechanism):
            errors[deletion.name] = (ErrorCode.resource_not_found,
                                     f"Attempt to delete a user credential that does not "
                                     f"exist: {deletion.name} {mechanism}")
    for upsertion in request.upsertions:
        if upsertion.name in errors or store is None:
            continue
        await store.put(upsertion.name, credential_from_salted_password(
            MECHANISM_TYPES[int(upsertion.mechanism)], bytes(upsertion.salt),
            upsertion.iterations, bytes(upsertion.salted_password)))
    results = [{"user": name, "error_code": errors.get(name, (ErrorCode.none, None))[0],
                "error_message": errors.get(name, (ErrorCode.none, None))[1]}
               for name in dict.fromkeys(c.name for c in changes)]
    return build_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "results": results})
