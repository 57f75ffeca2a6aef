"""Authorization of admin API requests with the brokers' own ACLs.

Owns three things:

* ``AclCache``: the cluster's ACLs, fetched from the brokers with DescribeAcls (confluent-kafka's
  ``AdminClient.describe_acls``, as the admin service's own Kafka principal) and kept for
  ``AuthSettings.acl_cache_s``; one fetch at a time (an ``asyncio.Lock``), the clock injected.
  A failed fetch fails the request (503): an admin API that cannot see the ACLs denies rather
  than guesses. Brokers without an authorizer answer SECURITY_DISABLED, also a 503 that says so;
* the decision: the pure ``strata.security.acl.Authorizer`` — the very rule the brokers
  apply (super users, deny wins, implied operations, ``allow.everyone.if.no.acl.found``) — for
  the request's principal and client address (Kafka's ``host``);
* ``Access``: what a route holds to ask "may this caller do *operation* on *resource*?".
  ``require`` answers 403 with Kafka's error name (``TOPIC_AUTHORIZATION_FAILED``,
  ``GROUP_AUTHORIZATION_FAILED``, ``CLUSTER_AUTHORIZATION_FAILED``); ``allowed`` filters lists
  the way Kafka's Metadata and ListGroups filter them (what you may not Describe, you do not see).

Each route asks for the rights of the Kafka request it stands for (each router's docstring
lists them; the chart README has the table). With authentication off (``AdminSettings.auth``
None) or ``--authorization none``, everything is allowed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AclBindingFilter as KafkaAclBindingFilter
from confluent_kafka.admin import AclOperation as KafkaAclOperation
from confluent_kafka.admin import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin import ResourcePatternType as KafkaPatternType
from confluent_kafka.admin import ResourceType as KafkaResourceType

from strata.admin.authentication import AuthorizationMode, AuthSettings
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.problems import ProblemError
from strata.client.kafka_errors import KafkaClientError
from strata.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Clock = Callable[[], float]

_FAILED_TITLES: Final = {ResourceType.TOPIC: "TOPIC_AUTHORIZATION_FAILED",
                         ResourceType.GROUP: "GROUP_AUTHORIZATION_FAILED",
                         ResourceType.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
                         ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
_RESOURCE_TYPES: Final = {KafkaResourceType.TOPIC.value: ResourceType.TOPIC,
                          KafkaResourceType.GROUP.value: ResourceType.GROUP,
                          KafkaResourceType.BROKER.value: ResourceType.CLUSTER,
                          KafkaResourceType.TRANSACTIONAL_ID.value: ResourceType.TRANSACTIONAL_ID}


def _value(field: Any) -> int:
    return int(field.value if hasattr(field, "value") else field)


def from_kafka(bindings: Iterable[KafkaAclBinding]) -> list[AclBinding]:
    """confluent-kafka's ACL bindings as ``strata.security.acl`` ones (Kafka's codes
    on both sides; librdkafka calls the Cluster resource type ``BROKER``)."""
    out = []
    for binding in bindings:
        resource_type = _RESOURCE_TYPES.get(_value(binding.restype))
        if resource_type is None:
            continue
        out.append(AclBinding(
            ResourcePattern(resource_type, str(binding.name),
                            PatternType(_value(binding.resource_pattern_type))),
            AccessControlEntry(str(binding.principal), str(binding.host),
                               AclOperation(_value(binding.operation)),
                               AclPermissionType(_value(binding.permission_type)))))
    return out


def describe_acls(gateway: KafkaGateway) -> list[AclBinding]:
    """Every ACL of the cluster (DescribeAcls with a match-all filter)."""
    match_all = KafkaAclBindingFilter(  # None: any name, principal, host (its stubs say str)
        KafkaResourceType.ANY, None, KafkaPatternType.ANY, None,  # type: ignore[arg-type]
        None, KafkaAclOperation.ANY, KafkaAclPermissionType.ANY)  # type: ignore[arg-type]
    kafka = gateway.kafka
    future = kafka.client.describe_acls(match_all, request_timeout=kafka.timeout_s)
    try:
        answer = kafka.result(future, "the ACLs (DescribeAcls)", "DescribeAcls")
    except KafkaClientError as failure:
        exc = gateway.problem(failure)
        if exc.title == "SECURITY_DISABLED":
            raise ProblemError(503, "SECURITY_DISABLED", "the brokers have no authorizer, so "
                               "there are no ACLs to decide admin requests with: configure "
                               "authorizer.class.name on the brokers, or run the admin service "
                               "with --authorization none") from None
        if exc.status >= 500:
            exc.status = 503
        raise exc from None
    return from_kafka(answer or [])


class AclCache:
    """The cluster's ACLs as an ``Authorizer``, refetched once older than ``ttl_s``."""

    def __init__(self, fetch: Callable[[], Any], settings: AuthSettings,
                 clock: Clock = time.monotonic) -> None:
        self._fetch = fetch  # an awaitable factory: () -> Awaitable[list[AclBinding]]
        self._settings = settings
        self._clock = clock
        self._lock = asyncio.Lock()
        self._authorizer: Authorizer | None = None
        self._fetched_at = 0.0

    async def authorizer(self) -> Authorizer:
        async with self._lock:
            now = self._clock()
            if self._authorizer is None or now - self._fetched_at >= self._settings.acl_cache_s:
                bindings = await self._fetch()
                if self._authorizer is None:
                    self._authorizer = Authorizer(
                        bindings, super_users=self._settings.super_users,
                        allow_everyone_if_no_acl_found=(
                            self._settings.allow_everyone_if_no_acl_found))
                else:
                    self._authorizer.update(bindings)
                self._fetched_at = now
            return self._authorizer


@dataclass(frozen=True, slots=True)
class Access:
    """One request's caller and how to decide what it may do."""

    principal: str | None  # None: authentication is off
    host: str
    mode: AuthorizationMode = AuthorizationMode.NONE
    cache: AclCache | None = None

    @property
    def unrestricted(self) -> bool:
        return self.principal is None or self.mode is AuthorizationMode.NONE or \
            self.cache is None

    async def allowed(self, operation: AclOperation, resource_type: ResourceType,
                      name: str = CLUSTER_NAME) -> bool:
        if self.unrestricted:
            return True
        assert self.cache is not None and self.principal is not None
        authorizer = await self.cache.authorizer()
        return authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    async def require(self, operation: AclOperation, resource_type: ResourceType,
                      name: str = CLUSTER_NAME) -> None:
        """403 with Kafka's ``*_AUTHORIZATION_FAILED`` name unless the caller may."""
        if not await self.allowed(operation, resource_type, name):
            raise denied(self.principal, operation, resource_type, name)

    async def require_any(self, *choices: tuple[AclOperation, ResourceType, str]) -> None:
        """Allowed if any one of ``choices`` is (CreateTopics: Cluster or Topic Create)."""
        for operation, resource_type, name in choices:
            if await self.allowed(operation, resource_type, name):
                return
        operation, resource_type, name = choices[-1]
        raise denied(self.principal, operation, resource_type, name)


def denied(principal: str | None, operation: AclOperation, resource_type: ResourceType,
           name: str) -> ProblemError:
    title = _FAILED_TITLES.get(resource_type, "CLUSTER_AUTHORIZATION_FAILED")
    what = (resource_type.kafka_name if resource_type is ResourceType.CLUSTER
            else f"{resource_type.kafka_name} {name!r}")
    return ProblemError(403, title, f"{principal} is not allowed to "
                                    f"{operation.kafka_name} {what}")
