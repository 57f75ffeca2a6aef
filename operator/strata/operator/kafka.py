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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

from confluent_kafka.admin import (
    ClusterMetadata,
    ConfigSource,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from strata.client.kafka_admin import KafkaAdmin, config_source_name
from strata.client.kafka_errors import KafkaClientError
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
