"""``/console/acls``: the cluster's ACLs — list, create, delete (Kafka's ``kafka-acls.sh``).

* ``GET /console/acls?q=``: DescribeAcls with a match-all filter (the same call the admin
  service authorizes with, ``strata.admin.authorization.describe_acls``), sorted by resource,
  then principal; ``q`` keeps the bindings whose principal or resource name contains it;
* ``POST /console/acls``: CreateAcls of one binding: resource type (Topic, Group, Cluster,
  TransactionalId), pattern type (Literal, Prefixed), resource name, principal, host,
  operation, permission (Allow, Deny). It is validated as the brokers validate it
  (``strata.security.acl.AclBinding.validate``: 422 naming what is wrong) before it is sent;
* ``POST /console/acls/delete``: DeleteAcls with a filter matching exactly that binding.

Authorization, Kafka's for these APIs: listing needs Cluster Describe, creating and deleting
Cluster Alter (the forms are shown only with it). A refused or invalid change is shown on the
page with Kafka's error name and message.
"""

from __future__ import annotations

from typing import Annotated, Final

from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AclBindingFilter as KafkaAclBindingFilter
from confluent_kafka.admin import AclOperation as KafkaAclOperation
from confluent_kafka.admin import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin import ResourcePatternType as KafkaPatternType
from confluent_kafka.admin import ResourceType as KafkaResourceType
from fastapi import APIRouter, Query
from fastapi.responses import Response

from strata.admin.authorization import describe_acls
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.problems import ProblemError
from strata.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

RESOURCE_TYPES: Final = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                         ResourceType.TRANSACTIONAL_ID)
PATTERN_TYPES: Final = (PatternType.LITERAL, PatternType.PREFIXED)
OPERATIONS: Final = tuple(op for op in AclOperation
                          if op not in (AclOperation.UNKNOWN, AclOperation.ANY,
                                        AclOperation.CREATE_TOKENS,
                                        AclOperation.DESCRIBE_TOKENS))
PERMISSIONS: Final = (AclPermissionType.ALLOW, AclPermissionType.DENY)


def binding_of(fields: dict[str, str]) -> AclBinding:
    """The binding a form describes; 422 naming the field that is wrong."""
    try:
        resource_type = ResourceType.parse(fields.get("resource_type", ""))
        pattern_type = PatternType.parse(fields.get("pattern_type", "") or "Literal")
        operation = AclOperation.parse(fields.get("operation", ""))
        permission = AclPermissionType.parse(fields.get("permission", "") or "Allow")
        name = fields.get("name", "").strip()
        if resource_type is ResourceType.CLUSTER:
            name = name or "kafka-cluster"
        binding = AclBinding(
            ResourcePattern(resource_type, name, pattern_type),
            AccessControlEntry(fields.get("principal", "").strip(),
                               fields.get("host", "").strip() or "*", operation, permission))
        binding.validate()
    except ValueError as exc:
        raise ProblemError(422, "VALIDATION_ERROR", str(exc)) from None
    return binding


def _kafka_binding(binding: AclBinding) -> KafkaAclBinding:
    pattern, entry = binding.pattern, binding.entry
    return KafkaAclBinding(KafkaResourceType(int(pattern.resource_type)), pattern.name,
                           KafkaPatternType(int(pattern.pattern_type)), entry.principal,
                           entry.host, KafkaAclOperation(int(entry.operation)),
                           KafkaAclPermissionType(int(entry.permission_type)))


def create_acl(gateway: KafkaGateway, binding: AclBinding) -> None:
    kafka = gateway.kafka
    futures = kafka.client.create_acls([_kafka_binding(binding)],
                                       request_timeout=kafka.timeout_s)
    for future in futures.values():
        kafka.result(future, "the ACL (CreateAcls)", "CreateAcls")


def delete_acl(gateway: KafkaGateway, binding: AclBinding) -> int:
    """DeleteAcls of exactly ``binding``; how many bindings were deleted."""
    kafka = gateway.kafka
    exact = _kafka_binding(binding)
    match = KafkaAclBindingFilter(exact.restype, exact.name, exact.resource_pattern_type,
                                  exact.principal, exact.host, exact.operation,
                                  exact.permission_type)
    futures = kafka.client.delete_acls([match], request_timeout=kafka.timeout_s)
    deleted = 0
    for future in futures.values():
        deleted += len(kafka.result(future, "the ACL (DeleteAcls)", "DeleteAcls") or [])
    return deleted


def _sort_key(binding: AclBinding) -> tuple[int, str, int, str, int, int]:
    p, e = binding.pattern, binding.entry
    return (int(p.resource_type), p.name, int(p.pattern_type), e.principal,
            int(e.operation), int(e.permission_type))


async def _render(console: ConsoleDep, q: str = "", error: ProblemError | None = None,
                  notice: str = "", form: dict[str, str] | None = None) -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    bindings = sorted(await console.gateway.run(describe_acls, console.gateway),
                      key=_sort_key)
    needle = q.strip()
    if needle:
        bindings = [b for b in bindings
                    if needle in b.entry.principal or needle in b.pattern.name]
    may_alter = await console.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER)
    return console.render(
        "acls.html", status=error.status if error is not None else 200, bindings=bindings,
        q=needle, may_alter=may_alter, error=error, notice=notice, form=form or {},
        resource_types=RESOURCE_TYPES, pattern_types=PATTERN_TYPES, operations=OPERATIONS,
        permissions=PERMISSIONS, section="security", tab="acls")


@router.get("/acls")
async def acls(console: ConsoleDep, q: Annotated[str, Query(max_length=255)] = ""
               ) -> Response:
    return await _render(console, q)


def _describe(binding: AclBinding) -> str:
    p, e = binding.pattern, binding.entry
    return (f"{e.permission_type.kafka_name} {e.principal} {e.operation.kafka_name} from "
            f"{e.host} on {p.resource_type.kafka_name} {p.pattern_type.kafka_name} {p.name}")


@router.post("/acls")
async def create(console: ConsoleDep) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    try:
        binding = binding_of(fields)
        await console.gateway.run(create_acl, console.gateway, binding)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, error=exc, form=fields)
    return await _render(console, notice=f"created: {_describe(binding)}")


@router.post("/acls/delete")
async def delete(console: ConsoleDep) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    binding = binding_of(fields)
    deleted = await console.gateway.run(delete_acl, console.gateway, binding)
    return await _render(console, notice=f"deleted {deleted}: {_describe(binding)}")
