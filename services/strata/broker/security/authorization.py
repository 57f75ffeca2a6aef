"""The broker's authorizer: ``authorizer.class.name``, the ACL store, and keeping both current.

Owns the shell around the pure rule of ``strata.security.acl``:

* configuration (Kafka's names): ``authorizer.class.name`` enables authorization — one of
  ``AUTHORIZER_CLASS_NAMES``; unset or empty, there is no authorizer, every request is allowed
  and the ACL APIs answer SECURITY_DISABLED. ``super.users`` (``User:a;User:b``) are allowed
  everything; ``allow.everyone.if.no.acl.found`` (default false) opens resources no ACL names;
* where the bindings come from: a cluster's metadata store (``ClusterImage.acls``, which the
  metadata cache keeps current from its watch: every broker sees a change within one watch
  event), or a single broker's ``acls.json``, re-read when CreateAcls/DeleteAcls change it and
  when its (inode, size, mtime) changes — checked every second for the CLI's writes
  (``strata.broker.file_follower``);
* the error codes of a refusal per resource type (``AUTHORIZATION_FAILED``).

Invariants: ``authorize`` never awaits and never touches the store (the hot path reads the
in-memory index of ``acl.Authorizer``); the index is replaced only on the event loop, by the
cache listener, the file poll or a write of this broker. After a write this broker waits until
its own view has the change before answering (read-your-writes for the caller).

The brokers' own principal: followers fetch with ClusterAction on the Cluster, so the principal
brokers log in with on the inter-broker listener (``sasl.jaas.config``'s user, or
``User:ANONYMOUS`` on a PLAINTEXT inter-broker listener) belongs in ``super.users`` (or gets a
``ClusterAction`` ACL on the Cluster), as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from strata.broker.cluster.image import ClusterImage
from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.file_follower import FileFollower
from strata.protocol.error_codes import ErrorCode
from strata.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    Authorizer,
    ResourceType,
    all_operations,
    parse_super_users,
    select,
)
from strata.security.acl_store import AclStore, FileAclStore, MetadataAclStore

if TYPE_CHECKING:
    from strata.broker.cluster.cluster import Cluster

logger = logging.getLogger(__name__)

AUTHORIZER_CLASS_NAMES: Final = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "strata.acl",
    "strata.broker.security.authorization.BrokerAuthorizer",
})

WaitForRevision = Callable[[int], Awaitable[bool]]

AUTHORIZATION_FAILED: Final[dict[ResourceType, ErrorCode]] = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


class AuthorizationFailed(Exception):
    """A request refused as a whole: answered with ``error_code`` in its top-level field."""

    def __init__(self, resource_type: ResourceType, name: str, operation: AclOperation) -> None:
        super().__init__(f"{operation.kafka_name} on {resource_type.kafka_name} {name!r} "
                         "is not authorized")
        self.error_code = AUTHORIZATION_FAILED.get(resource_type,
                                                   ErrorCode.cluster_authorization_failed)


def authorized_operations(authorizer: BrokerAuthorizer | None, principal: str, host: str,
                          resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
    """A ``*_authorized_operations`` bit field (every supported operation without ACLs)."""
    if authorizer is None:
        return all_operations(resource_type)
    return authorizer.rules.authorized_operations(principal, host, resource_type, name)


def authorizer_enabled(config: BrokerConfig) -> bool:
    """Whether ``authorizer.class.name`` asks for ACLs (``ConfigError`` for an unknown class)."""
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(f"authorizer.class.name {name!r} is not served; use one of "
                          + ", ".join(sorted(AUTHORIZER_CLASS_NAMES)))
    return True


class BrokerAuthorizer:
    """One broker's ACLs: decisions from memory, changes through ``create`` / ``delete``."""

    def __init__(self, config: BrokerConfig, store: AclStore, *,
                 wait_for_revision: WaitForRevision | None = None) -> None:
        try:
            supers = parse_super_users(config.get("super.users"))
        except ValueError as exc:
            raise ConfigError(f"super.users: {exc}") from None
        self.store = store
        self.rules = Authorizer(
            super_users=supers,
            allow_everyone_if_no_acl_found=config.get_bool("allow.everyone.if.no.acl.found"))
        self._wait_for_revision = wait_for_revision
        self._follower: FileFollower | None = None

    # ---------------------------------------------------------------- decisions (hot path)
    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        return self.rules.authorize(principal, host, operation, resource_type, name)

    @property
    def bindings(self) -> frozenset[AclBinding]:
        return self.rules.bindings

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return select(self.rules.bindings, acl_filter)

    # ---------------------------------------------------------------- keeping current
    async def start_file(self) -> None:
        """A single broker: load ``acls.json`` and follow it for other writers (the CLI)."""
        assert isinstance(self.store, FileAclStore)
        self._follower = FileFollower(self.store.file, self._load_file, "ACLs")
        await self._follower.start()

    def apply_image(self, image: ClusterImage) -> None:
        """A cluster: take the image's ACLs (at startup, then from ``on_image``)."""
        if image.acls != self.rules.bindings:
            self.rules.update(image.acls)
            logger.info("ACLs now %d bindings (metadata revision %d)", len(image.acls),
                        image.revision)

    async def on_image(self, image: ClusterImage) -> None:
        """The metadata cache's listener: every published image."""
        self.apply_image(image)

    async def _load_file(self) -> None:
        assert isinstance(self.store, FileAclStore)
        bindings, _ = await self.store.bindings()
        if frozenset(bindings) != self.rules.bindings:
            self.rules.update(bindings)
            logger.info("ACLs now %d bindings (%s)", len(bindings), self.store.path)

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    # ---------------------------------------------------------------- changes
    async def create(self, bindings: Sequence[AclBinding]) -> None:
        revision = await self.store.create(bindings)
        await self._caught_up(revision)

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        matched, revision = await self.store.delete(filters)
        await self._caught_up(revision)
        return matched

    async def _caught_up(self, revision: int) -> None:
        if isinstance(self.store, MetadataAclStore):
            if revision and self._wait_for_revision is not None:
                await self._wait_for_revision(revision)
        elif self._follower is not None:
            await self._follower.reload_now()


async def open_authorizer(config: BrokerConfig, cluster: Cluster | None,
                          log_dir: Path) -> BrokerAuthorizer | None:
    """The broker's authorizer with its ACLs loaded (None without ``authorizer.class.name``):
    following the cluster's metadata cache, or the single broker's ``acls.json``."""
    if not authorizer_enabled(config):
        return None
    if cluster is None:
        authorizer = BrokerAuthorizer(config, FileAclStore(log_dir))
        await authorizer.start_file()
    else:
        authorizer = BrokerAuthorizer(config, MetadataAclStore(cluster.store),
                                      wait_for_revision=cluster.cache.wait_for_revision)
        authorizer.apply_image(cluster.image)
        cluster.cache.add_listener(authorizer.on_image)
    logger.info("authorizer on: %d ACL bindings, super.users %s", len(authorizer.bindings),
                ", ".join(sorted(authorizer.rules.super_users)) or "none")
    return authorizer


__all__ = ["AUTHORIZATION_FAILED", "CLUSTER_NAME", "AuthorizationFailed", "BrokerAuthorizer",
           "authorizer_enabled", "open_authorizer"]
