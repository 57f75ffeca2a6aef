"""The Kafka side of the operator: every question and change goes over the Kafka protocol
(confluent-kafka's ``AdminClient``), never through broker internals (docs/architecture.md).

Owns one short-lived ``AdminClient`` per call site (a reconcile), with bounded timeouts: a
paused or unreachable cluster makes a call fail within ``timeout`` seconds, which the callers
turn into "wait" (rolling restarts) or a retry (Topics). Nothing here decides anything.

``KafkaCluster`` is the production implementation of the ``Cluster`` protocol; tests of the
reconcile logic pass their own. AlterPartitionReassignments is not in confluent-kafka's
AdminClient: ``reassign`` sends it with our own codec (``reassign.py``), logged in with the same
client settings (TLS, SASL); when the controller does not serve it or cannot be asked, the
scale-down waits, with the reason in the Broker's Ready condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from strata.operator.reassign import (
    ReassignmentNotServed,
    ReassignmentUnavailable,
    alter_partition_reassignments,
)
from strata.operator.rolling import ClusterHealth, TopicPartition, under_replicated
from strata.operator.topic_sync import ObservedTopic


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


def _wait(future: Any, timeout: float, what: str) -> Any:
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError):
            raise KafkaOperationError(f"{what}: {error.str()}", error.name()) from None
        raise KafkaOperationError(f"{what}: {exc}") from None
    except TimeoutError as exc:  # concurrent.futures.TimeoutError is TimeoutError (3.11)
        raise KafkaOperationError(f"{what}: no answer in {timeout:.0f}s") from exc


class KafkaCluster:
    """A cluster reached at ``bootstrap`` (``host:port,...``)."""

    def __init__(self, bootstrap: str, timeout: float = 5.0,
                 client_config: Mapping[str, str] | None = None) -> None:
        """``client_config``: librdkafka security settings (``client_security``)."""
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.client_config = dict(client_config or {})
        self._admin = AdminClient({
            **(client_config or {}),
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(timeout * 1000),
            "request.timeout.ms": int(timeout * 1000),
            "reconnect.backoff.max.ms": 1000,
            "client.id": "strata-operator",
        })

    def _metadata(self) -> Any:
        try:
            return self._admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise KafkaOperationError(f"Metadata from {self.bootstrap}: {exc}") from None

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

    # ------------------------------------------------------------------ topics
    def describe_topic(self, topic: str) -> ObservedTopic | None:
        metadata = self._metadata()
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None
                             and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if found.error is not None:
            raise KafkaOperationError(f"topic {topic!r}: {found.error.str()}",
                                      found.error.name())
        resource = ConfigResource("topic", topic)
        entries: Mapping[str, ConfigEntry] = _wait(
            self._admin.describe_configs([resource])[resource], self.timeout,
            f"DescribeConfigs {topic!r}")
        dynamic = {k: str(e.value) for k, e in entries.items()
                   if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG}
        return ObservedTopic(partitions=len(found.partitions), dynamic_config=dynamic)

    def create_topic(self, topic: str, partitions: int, replicas: int | None,
                     config: Mapping[str, str]) -> None:
        new = NewTopic(topic, num_partitions=partitions,
                       replication_factor=-1 if replicas is None else replicas,
                       config=dict(config))
        _wait(self._admin.create_topics([new])[topic], self.timeout, f"CreateTopics {topic!r}")

    def create_partitions(self, topic: str, total: int) -> None:
        future = self._admin.create_partitions([NewPartitions(topic, total)])[topic]
        _wait(future, self.timeout, f"CreatePartitions {topic!r}")

    def alter_config(self, topic: str, set_config: Mapping[str, str],
                     delete: tuple[str, ...]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_config.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        resource = ConfigResource("topic", topic, incremental_configs=entries)
        futures = self._admin.incremental_alter_configs([resource])
        for future in futures.values():
            _wait(future, self.timeout, f"IncrementalAlterConfigs {topic!r}")

    def delete_topic(self, topic: str) -> None:
        try:
            _wait(self._admin.delete_topics([topic])[topic], self.timeout,
                  f"DeleteTopics {topic!r}")
        except KafkaOperationError as exc:
            if exc.code != "UNKNOWN_TOPIC_OR_PART":
                raise

    # ------------------------------------------------------------------ SCRAM users
    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]:
        """DescribeUserScramCredentials: the mechanisms each user has credentials for (empty
        for a user without any)."""
        if not users:
            return {}
        futures = self._admin.describe_user_scram_credentials(
            list(users), request_timeout=self.timeout)
        assert isinstance(futures, dict)  # a list in: a future per user
        out: dict[str, frozenset[str]] = {}
        for user, future in futures.items():
            try:
                description = _wait(future, self.timeout,
                                    f"DescribeUserScramCredentials {user!r}")
            except KafkaOperationError as exc:
                if exc.code != "RESOURCE_NOT_FOUND":
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
        change = UserScramCredentialUpsertion(user, info, password.encode("utf-8"))
        for future in self._admin.alter_user_scram_credentials(
                [change], request_timeout=self.timeout).values():
            _wait(future, self.timeout, f"AlterUserScramCredentials {user!r}")

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        """AlterUserScramCredentials deletion; a credential already gone counts as deleted."""
        change = UserScramCredentialDeletion(user, ScramMechanism[mechanism.replace("-", "_")])
        try:
            for future in self._admin.alter_user_scram_credentials(
                    [change], request_timeout=self.timeout).values():
                _wait(future, self.timeout, f"AlterUserScramCredentials {user!r}")
        except KafkaOperationError as exc:
            if exc.code != "RESOURCE_NOT_FOUND":
                raise
