"""The Kafka side of the operator: every question and change goes over the Kafka protocol
(confluent-kafka's ``AdminClient``), never through broker internals (docs/architecture.md).

Owns one short-lived admin client per call site (a reconcile): ``strata.client.kafka_admin``'s
``KafkaAdmin``, shared with the CLI and the admin service, with bounded timeouts: a paused or
unreachable cluster makes a call fail within about ``timeout`` seconds, which the callers turn
into "wait" (rolling restarts) or a retry (Topics). Nothing here decides anything. A failed call
(``KafkaClientError``) becomes ``KafkaOperationError`` in one place (``_asking``), its message
``<Kafka request> <subject>: <librdkafka's text>``.

``KafkaCluster`` is the production implementation of the ``Cluster`` protocol; tests of the
reconcile logic pass their own. AlterPartitionReassignments is not in confluent-kafka's
AdminClient: ``reassign`` sends it with our own codec (``reassign.py``), logged in with the same
client settings (TLS, SASL); when the controller does not serve it or cannot be asked, the
scale-down waits, with the reason in the Broker's Ready condition.

A ``User``'s side (``user.py``): the ACLs of one principal (DescribeAcls, CreateAcls,
DeleteAcls through confluent-kafka; librdkafka names Kafka's CLUSTER resource type BROKER) and
the client quotas of one ``user`` entity (Describe/AlterClientQuotas through
``strata.client.client_quotas``, which librdkafka has no call for, logged in the same way).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from strata.client.client_quotas import QuotaTarget, alter_client_quotas, describe_client_quotas
from strata.client.kafka_admin import KafkaAdmin, config_source_name
from strata.client.kafka_errors import KafkaClientError
from strata.operator.reassign import (
    CLIENT_ID,
    ReassignmentNotServed,
    ReassignmentUnavailable,
    alter_partition_reassignments,
    ongoing_reassignments,
    security_of,
)
from strata.operator.rolling import ClusterHealth, TopicPartition, under_replicated
from strata.operator.throttle import BROKER_CONFIGS, TOPIC_CONFIGS, ThrottlePlan
from strata.operator.topic_sync import ObservedTopic
from strata.operator.user_spec import AclRule

# librdkafka calls Kafka's CLUSTER resource type BROKER (the same code, 4).
_RESOURCE_TYPE: dict[str, ResourceType] = {
    "TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP, "CLUSTER": ResourceType.BROKER,
    "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
_RESOURCE_NAME = {int(v.value): k for k, v in _RESOURCE_TYPE.items()}


def _code(field: Any) -> int:
    return int(field.value if hasattr(field, "value") else field)


def acl_binding(principal: str, rule: AclRule) -> AclBinding:
    return AclBinding(*_acl_fields(principal, rule))


def acl_filter(principal: str, rule: AclRule) -> AclBindingFilter:
    """A filter matching exactly ``rule`` of ``principal`` (DeleteAcls)."""
    return AclBindingFilter(*_acl_fields(principal, rule))


def _acl_fields(principal: str, rule: AclRule) -> tuple[Any, ...]:
    return (_RESOURCE_TYPE[rule.resource_type], rule.resource_name,
            ResourcePatternType[rule.pattern_type], principal, rule.host,
            AclOperation[rule.operation], AclPermissionType[rule.permission])


def acl_rule(binding: AclBinding) -> AclRule | None:
    """confluent-kafka's binding as our rule (None: a resource type the User cannot name)."""
    kind = _RESOURCE_NAME.get(_code(binding.restype))
    if kind is None:
        return None
    return AclRule(kind, str(binding.name),
                   ResourcePatternType(_code(binding.resource_pattern_type)).name,
                   AclOperation(_code(binding.operation)).name, str(binding.host),
                   AclPermissionType(_code(binding.permission_type)).name)


class KafkaOperationError(RuntimeError):
    """A Kafka request failed; ``code`` is the Kafka error name when there is one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class Cluster(Protocol):
    """What the operator asks of a Kafka cluster."""

    def health(self) -> ClusterHealth: ...

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]: ...

    def reassign(self, plan: Mapping[TopicPartition, tuple[int, ...]]) -> bool: ...

    def describe_topic(self, topic: str) -> ObservedTopic | None: ...

    def create_topic(self, topic: str, partitions: int, replicas: int | None,
                     config: Mapping[str, str]) -> None: ...

    def create_partitions(self, topic: str, total: int) -> None: ...

    def alter_config(self, topic: str, set_config: Mapping[str, str],
                     delete: tuple[str, ...]) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]: ...

    def upsert_scram_credential(self, user: str, mechanism: str, password: str,
                                iterations: int) -> None: ...

    def delete_scram_credential(self, user: str, mechanism: str) -> None: ...

    def racks(self) -> dict[int, str | None]: ...

    def leaders(self) -> dict[TopicPartition, int]: ...

    def ongoing_reassignments(self) -> set[TopicPartition]: ...

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> None: ...

    def set_throttle(self, plan: ThrottlePlan) -> None: ...

    def clear_throttle(self, plan: ThrottlePlan) -> None: ...


@contextmanager
def _asking(what: str) -> Iterator[None]:
    """Around the calls of one operation (``what``: the Kafka request and its subject): a
    ``KafkaClientError`` becomes ``KafkaOperationError`` with Kafka's error name as ``code``."""
    try:
        yield
    except KafkaClientError as exc:
        raise KafkaOperationError(f"{what}: {exc.message if exc.timed_out else exc.text}",
                                  exc.name) from None


class KafkaCluster:
    """A cluster reached at ``bootstrap`` (``host:port,...``)."""

    def __init__(self, bootstrap: str, timeout: float = 5.0,
                 client_config: Mapping[str, str] | None = None) -> None:
        """``client_config``: librdkafka security settings (``client_security``)."""
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.client_config = dict(client_config or {})
        self._admin = KafkaAdmin(bootstrap, "strata-operator", timeout, self.client_config)

    def _metadata(self) -> ClusterMetadata:
        with _asking(f"Metadata from {self.bootstrap}"):
            return self._admin.metadata()

    # ------------------------------------------------------------------ cluster health
    def health(self) -> ClusterHealth:
        """Under-replicated partitions from a Metadata request (ISR smaller than replicas)."""
        try:
            metadata = self._metadata()
        except KafkaOperationError as exc:
            return ClusterHealth(reachable=False, error=str(exc))
        rows = [((str(t.topic), int(p.id)), list(p.replicas), list(p.isrs))
                for t in metadata.topics.values() for p in t.partitions.values()]
        return ClusterHealth(reachable=True, under_replicated=under_replicated(rows))

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        metadata = self._metadata()
        return {(str(t.topic), int(p.id)): tuple(p.replicas)
                for t in metadata.topics.values() for p in t.partitions.values()}

    def reassign(self, plan: Mapping[TopicPartition, tuple[int, ...]]) -> bool:
        """Send AlterPartitionReassignments to the controller (``reassign.py``: our codec, as
        confluent-kafka has no call for it), logged in with the same ``client_config``. True:
        accepted; False: the controller does not serve the API; ``KafkaOperationError``: it
        could not be asked (unreachable, TLS or login refused) or partitions were refused."""
        metadata = self._metadata()
        controller = metadata.brokers.get(metadata.controller_id)
        if controller is None:
            return False
        try:
            refused = alter_partition_reassignments(str(controller.host), int(controller.port),
                                                    plan, self.timeout, self.client_config)
        except ReassignmentNotServed:
            return False
        except ReassignmentUnavailable as exc:
            raise KafkaOperationError(f"AlterPartitionReassignments: {exc}") from None
        if refused:
            shown = ", ".join(f"{t}-{p}: {e}" for (t, p), e in sorted(refused.items())[:5])
            raise KafkaOperationError(f"AlterPartitionReassignments refused {shown}")
        return True

    # ------------------------------------------------------------------ balancing
    def racks(self) -> dict[int, str | None]:
        """DescribeCluster: every registered broker and its ``broker.rack`` (None: none)."""
        with _asking(f"DescribeCluster from {self.bootstrap}"):
            described = self._admin.describe_cluster()
        return {int(node.id): (str(node.rack) if node.rack else None)
                for node in described.nodes}

    def leaders(self) -> dict[TopicPartition, int]:
        metadata = self._metadata()
        return {(str(t.topic), int(p.id)): int(p.leader)
                for t in metadata.topics.values() for p in t.partitions.values()}

    def ongoing_reassignments(self) -> set[TopicPartition]:
        """ListPartitionReassignments to the controller (``reassign.py``: our codec)."""
        metadata = self._metadata()
        controller = metadata.brokers.get(metadata.controller_id)
        if controller is None:
            raise KafkaOperationError("ListPartitionReassignments: no controller")
        try:
            return set(ongoing_reassignments(str(controller.host), int(controller.port),
                                             self.timeout, self.client_config))
        except ReassignmentUnavailable as exc:
            raise KafkaOperationError(f"ListPartitionReassignments: {exc}") from None

    def elect_preferred_leaders(self, partitions: Sequence[TopicPartition]) -> None:
        """ElectLeaders (PREFERRED): each partition's first replica leads again, where it is
        in sync; ELECTION_NOT_NEEDED (it leads already) is no error. A partition whose
        preferred leader is not in sync is left for the next pass (logged by the caller)."""
        if not partitions:
            return
        # No timeout keywords: confluent-kafka 2.16.1's elect_leaders fails on any (see
        # strata.cli.cluster); the client's socket.timeout.ms bounds it.
        with _asking("ElectLeaders"):
            result = self._admin.result(self._admin.client.elect_leaders(
                ElectionType.PREFERRED, [KafkaTopicPartition(t, p) for t, p in partitions]),
                "preferred leaders", "ElectLeaders")
        failed = {}
        for tp, outcome in (result or {}).items():
            error = (outcome.args[0] if isinstance(outcome, KafkaException) and outcome.args
                     else outcome)
            if isinstance(error, KafkaError) and error.code() != KafkaError.ELECTION_NOT_NEEDED:
                failed[(str(tp.topic), int(tp.partition))] = error.name()
        if failed:
            shown = ", ".join(f"{t}-{p}: {name}" for (t, p), name in sorted(failed.items())[:5])
            raise KafkaOperationError(f"ElectLeaders refused {shown}")

    # ------------------------------------------------------------------ throttles
    def set_throttle(self, plan: ThrottlePlan) -> None:
        """IncrementalAlterConfigs: the plan's topic configs, then the rate on its brokers."""
        for topic, configs in plan.topics.items():
            self.alter_config(topic, configs, ())
        for broker in plan.brokers:
            self._alter_broker(broker, plan.broker_configs(), ())

    def clear_throttle(self, plan: ThrottlePlan) -> None:
        """Delete what ``set_throttle`` set (a topic deleted or a broker gone meanwhile has
        nothing left to clear)."""
        for topic in plan.topics:
            try:
                self.alter_config(topic, {}, TOPIC_CONFIGS)
            except KafkaOperationError as exc:
                if exc.code != "UNKNOWN_TOPIC_OR_PARTITION":
                    raise
        registered = self.racks() if plan.brokers else {}
        for broker in plan.brokers:
            if broker in registered:
                self._alter_broker(broker, {}, BROKER_CONFIGS)

    def _alter_broker(self, broker: int, set_config: Mapping[str, str],
                      delete: Sequence[str]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_config.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        resource = ConfigResource("broker", str(broker), incremental_configs=entries)
        with _asking(f"IncrementalAlterConfigs broker {broker}"):
            futures = self._admin.client.incremental_alter_configs(
                [resource], request_timeout=self.timeout)
            self._admin.result(futures[resource], f"broker {broker}", "IncrementalAlterConfigs")

    # ------------------------------------------------------------------ topics
    def describe_topic(self, topic: str) -> ObservedTopic | None:
        metadata = self._metadata()
        if topic not in metadata.topics:
            return None
        with _asking(f"topic {topic!r}"):
            try:
                found = self._admin.topic(topic, metadata)
            except KafkaClientError as exc:
                if exc.name == "UNKNOWN_TOPIC_OR_PARTITION":
                    return None
                raise
        with _asking(f"DescribeConfigs {topic!r}"):
            entries = self._admin.topic_configs(topic)
        dynamic = {k: str(e.value) for k, e in entries.items()
                   if config_source_name(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.name}
        return ObservedTopic(
            partitions=len(found.partitions), dynamic_config=dynamic,
            assignment={int(p.id): tuple(int(b) for b in p.replicas)
                        for p in found.partitions.values()},
            brokers=tuple(sorted(int(b) for b in metadata.brokers)))

    def create_topic(self, topic: str, partitions: int, replicas: int | None,
                     config: Mapping[str, str]) -> None:
        new = NewTopic(topic, num_partitions=partitions,
                       replication_factor=-1 if replicas is None else replicas,
                       config=dict(config))
        with _asking(f"CreateTopics {topic!r}"):
            self._admin.create_topic(new)

    def create_partitions(self, topic: str, total: int) -> None:
        with _asking(f"CreatePartitions {topic!r}"):
            self._admin.create_partitions(topic, total)

    def alter_config(self, topic: str, set_config: Mapping[str, str],
                     delete: tuple[str, ...]) -> None:
        with _asking(f"IncrementalAlterConfigs {topic!r}"):
            self._admin.alter_topic_configs(topic, set_config, delete)

    def delete_topic(self, topic: str) -> None:
        """DeleteTopics; a topic already gone counts as deleted."""
        with _asking(f"DeleteTopics {topic!r}"):
            error = self._admin.delete_topics([topic])[topic]
            if error is not None and error.name != "UNKNOWN_TOPIC_OR_PARTITION":
                raise error

    # ------------------------------------------------------------------ SCRAM users
    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]:
        """DescribeUserScramCredentials: the mechanisms each user has credentials for (empty
        for a user without any)."""
        if not users:
            return {}
        futures = self._admin.client.describe_user_scram_credentials(
            list(users), request_timeout=self.timeout)
        assert isinstance(futures, dict)  # a list in: a future per user
        out: dict[str, frozenset[str]] = {}
        for user, future in futures.items():
            with _asking(f"DescribeUserScramCredentials {user!r}"):
                try:
                    description = self._admin.result(future, f"user {user!r}",
                                                     "DescribeUserScramCredentials")
                except KafkaClientError as exc:
                    if exc.name != "RESOURCE_NOT_FOUND":
                        raise
                    out[user] = frozenset()
                    continue
            out[user] = frozenset(ScramMechanism(c.mechanism).name.replace("_", "-")
                                  for c in description.scram_credential_infos)
        return out

    def upsert_scram_credential(self, user: str, mechanism: str, password: str,
                                iterations: int) -> None:
        """AlterUserScramCredentials upsertion (librdkafka salts and hashes the password)."""
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
        self._alter_scram(UserScramCredentialUpsertion(user, info, password.encode("utf-8")))

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        """AlterUserScramCredentials deletion; a credential already gone counts as deleted."""
        self._alter_scram(
            UserScramCredentialDeletion(user, ScramMechanism[mechanism.replace("-", "_")]),
            missing_ok=True)

    def _alter_scram(self, change: UserScramCredentialUpsertion | UserScramCredentialDeletion,
                     missing_ok: bool = False) -> None:
        user = change.user
        with _asking(f"AlterUserScramCredentials {user!r}"):
            for future in self._admin.client.alter_user_scram_credentials(
                    [change], request_timeout=self.timeout).values():
                try:
                    self._admin.result(future, f"user {user!r}", "AlterUserScramCredentials")
                except KafkaClientError as exc:
                    if not (missing_ok and exc.name == "RESOURCE_NOT_FOUND"):
                        raise

    # ------------------------------------------------------------------ ACLs (a User's)
    def acls(self, principal: str) -> frozenset[AclRule]:
        """DescribeAcls: every ACL of ``principal``."""
        match = AclBindingFilter(  # None: any name and host (the stubs say str)
            ResourceType.ANY, None, ResourcePatternType.ANY,  # type: ignore[arg-type]
            principal, None, AclOperation.ANY, AclPermissionType.ANY)  # type: ignore[arg-type]
        with _asking(f"DescribeAcls {principal!r}"):
            found = self._admin.result(
                self._admin.client.describe_acls(match, request_timeout=self.timeout),
                f"the ACLs of {principal}", "DescribeAcls")
        return frozenset(rule for b in found or () if (rule := acl_rule(b)) is not None)

    def create_acls(self, principal: str, rules: Sequence[AclRule]) -> None:
        if not rules:
            return
        with _asking(f"CreateAcls {principal!r}"):
            for future in self._admin.client.create_acls(
                    [acl_binding(principal, r) for r in rules],
                    request_timeout=self.timeout).values():
                self._admin.result(future, f"an ACL of {principal}", "CreateAcls")

    def delete_acls(self, principal: str, rules: Sequence[AclRule] | None) -> None:
        """DeleteAcls of exactly ``rules`` (None: every ACL of ``principal``)."""
        if rules is not None and not rules:
            return
        filters = ([acl_filter(principal, r) for r in rules] if rules is not None else [
            AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,  # type: ignore[arg-type]
                             principal, None, AclOperation.ANY,  # type: ignore[arg-type]
                             AclPermissionType.ANY)])
        with _asking(f"DeleteAcls {principal!r}"):
            for future in self._admin.client.delete_acls(
                    filters, request_timeout=self.timeout).values():
                self._admin.result(future, f"the ACLs of {principal}", "DeleteAcls")

    # ------------------------------------------------------------------ quotas (a User's)
    def _quota_target(self) -> QuotaTarget:
        try:
            security = security_of(self.client_config)
        except ReassignmentUnavailable as exc:
            raise KafkaOperationError(str(exc)) from None
        return QuotaTarget(self.bootstrap, security, self.timeout, CLIENT_ID)

    def user_quotas(self, user: str) -> dict[str, float]:
        """DescribeClientQuotas of the entity ``user=<user>`` exactly."""
        with _asking(f"DescribeClientQuotas user {user!r}"):
            entries = asyncio.run(describe_client_quotas(self._quota_target(),
                                                         [("user", user)], strict=True))
        return {k: float(v) for entity, values in entries if entity == [("user", user)]
                for k, v in values.items()}

    def alter_user_quotas(self, user: str, set_quotas: Mapping[str, float],
                          remove: Sequence[str]) -> None:
        if not set_quotas and not remove:
            return
        with _asking(f"AlterClientQuotas user {user!r}"):
            asyncio.run(alter_client_quotas(self._quota_target(), [("user", user)],
                                            set_quotas, remove, validate_only=False))
