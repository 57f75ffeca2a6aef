"""``KafkaAdmin``: the one confluent-kafka ``AdminClient`` wrapper of the CLI, the admin service
and the operator.

Owns making the ``AdminClient`` (``kafka_config.client_config`` from the bootstrap servers,
client id, ``timeout_s`` and login properties, with a ``ConnectionErrors`` as ``error_cb``),
waiting for its futures, and the admin requests two or more of those tools make: Metadata,
CreateTopics, CreatePartitions, IncrementalAlterConfigs, DescribeConfigs, DeleteTopics,
ListOffsets, DescribeCluster and the consumer-group requests (ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit via AlterConsumerGroupOffsets, DeleteGroups). A request only one tool
makes goes through ``client`` and ``result``.

Invariants:

* Bounded waits: every request carries ``request_timeout=timeout_s`` and every future is
  awaited for at most ``timeout_s`` plus ``FUTURE_GRACE_S``, so an unreachable cluster fails a
  call within about ``timeout_s`` instead of hanging.
* One failure type: whatever confluent-kafka raises or reports per item (``KafkaException``,
  a ``KafkaError``, a future that does not finish) leaves here as
  ``strata.client.kafka_errors.KafkaClientError``, naming the Kafka request and its subject;
  each tool translates it into its own surface in one place. A Metadata request no broker
  answered is ``unreachable``, with librdkafka's last ``error_cb`` report as ``reason``.
* Nothing is created for a question: metadata asks for every topic, so a broker with
  ``auto.create.topics.enable`` creates none.

Making the ``AdminClient`` may raise librdkafka's ``KafkaException`` (``_INVALID_ARG``: a
property it refuses); that is a configuration mistake, left to the caller. librdkafka's calls
block: callers on an event loop run these methods on a worker thread.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupDescription,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    TopicMetadata,
)

from strata.client.group_offsets import committed_offsets
from strata.client.kafka_config import client_config
from strata.client.kafka_errors import KafkaClientError, kafka_error_of

# Extra seconds to wait for a future beyond the timeout its request carries.
FUTURE_GRACE_S: Final = 2.0

# librdkafka's local errors that mean "no broker answered", not "a broker said no".
UNREACHABLE_CODES: Final = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
})

# ListOffsets errors that say the client's or a broker's metadata is behind, asked again
# (Kafka's admin client retries them as ``InvalidMetadataException``s) every RETRY_BACKOFF_S
# (Kafka's ``retry.backoff.ms``) for at most LIST_OFFSETS_RETRY_S. ``_NOENT`` is librdkafka's
# own "Failed to query partition leaders: No leaders found" (its metadata has no leader yet).
LIST_OFFSETS_RETRIABLE: Final = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "_NOENT"})
RETRY_BACKOFF_S: Final = 0.1
LIST_OFFSETS_RETRY_S: Final = 5.0

PartitionKey = tuple[str, int]
# Where ListOffsets looks: the log start offset, the log end offset, or the first offset at or
# after an epoch-ms timestamp.
OffsetAt = Literal["earliest", "latest"] | int


class ConnectionErrors:
    """``error_cb`` for a client: remembers the last connection-level error it reported.

    librdkafka calls it from ``poll()`` (or a consumer's ``poll``) on the caller's thread.
    ``_ALL_BROKERS_DOWN`` only sets ``all_brokers_down``: it says that, not why.
    """

    def __init__(self) -> None:
        self.last: KafkaError | None = None
        self.all_brokers_down = False

    def __call__(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_brokers_down = True
        else:
            self.last = error

    def unreachable(self, cause: KafkaError, bootstrap: str, timeout_s: float
                    ) -> KafkaClientError:
        """"No broker at ``bootstrap`` answered within ``timeout_s``" (``cause``: the error
        the waiting call ended with), with the last reason reported here."""
        failure = KafkaClientError.of(cause, f"the cluster at {bootstrap}", "Metadata")
        failure.unreachable = True
        failure.reason = self.reason
        failure.bootstrap, failure.timeout_s = bootstrap, timeout_s
        return failure

    @property
    def reason(self) -> str | None:
        """librdkafka's text of the last connection error it reported, if any."""
        return None if self.last is None else str(self.last.str())

    def reset(self) -> None:
        """A broker answered: earlier connection errors are history."""
        self.all_brokers_down = False


def cluster_metadata(client: Any, bootstrap: str, timeout_s: float,
                     errors: ConnectionErrors) -> ClusterMetadata:
    """Every topic's metadata from ``client`` (an admin client, producer or consumer) within
    ``timeout_s``; ``KafkaClientError`` (``unreachable`` when no broker answered)."""
    try:
        metadata: ClusterMetadata = client.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        client.poll(0)  # serve error_cb: it holds the reason (refused, resolve, login...)
        cause = kafka_error_of(exc)
        if cause is not None and cause.code() in UNREACHABLE_CODES:
            raise errors.unreachable(cause, bootstrap, timeout_s) from None
        failure = KafkaClientError.of(exc, f"the cluster at {bootstrap}", "Metadata")
        failure.reason = errors.reason
        raise failure from None
    errors.reset()
    return metadata


def topic_of(metadata: ClusterMetadata, topic: str) -> TopicMetadata:
    """``topic``'s entry in ``metadata``; ``KafkaClientError`` UNKNOWN_TOPIC_OR_PARTITION when
    the cluster does not have it, or the error its entry carries."""
    found: TopicMetadata | None = metadata.topics.get(topic)
    if found is None:
        raise KafkaClientError.unknown_topic(topic)
    if found.error is not None:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise KafkaClientError.unknown_topic(topic)
        raise KafkaClientError.of(found.error, f"topic {topic!r}", "Metadata")
    return found


def check_partitions(topic: TopicMetadata, wanted: Iterable[int]) -> None:
    """``KafkaClientError`` UNKNOWN_TOPIC_OR_PARTITION naming the first of ``wanted`` that
    ``topic`` does not have."""
    for partition in wanted:
        if partition not in topic.partitions:
            raise KafkaClientError(
                "UNKNOWN_TOPIC_OR_PARTITION",
                f"topic {topic.topic!r} has {len(topic.partitions)} partitions; there is no "
                f"partition {partition}", subject="", api="Metadata")


def offset_spec(at: OffsetAt) -> Any:
    """confluent-kafka's ``OffsetSpec`` for ``at`` (its factories are untyped in its stubs)."""
    if at == "earliest":
        return OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    if at == "latest":
        return OffsetSpec.latest()  # type: ignore[no-untyped-call]
    return OffsetSpec.for_timestamp(at)


def config_source_name(source: object) -> str:
    """Kafka's name of a config's source (``DYNAMIC_TOPIC_CONFIG``, ``DEFAULT_CONFIG``...),
    ``UNKNOWN_CONFIG`` for a value confluent-kafka does not know."""
    if isinstance(source, ConfigSource):
        return source.name
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


class KafkaAdmin:
    """One ``AdminClient`` of ``bootstrap`` (``host:port,...``), every call bounded by
    ``timeout_s``. Thread-safe as confluent-kafka's ``AdminClient`` is."""

    def __init__(self, bootstrap: str, client_id: str, timeout_s: float,
                 properties: Mapping[str, Any] | None = None,
                 errors: ConnectionErrors | None = None,
                 *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """``properties``: the login (``security.protocol``, ``sasl.*``, ``ssl.*``...);
        ``errors``: the ``error_cb`` to share with the caller's other clients; ``monotonic``
        and ``sleep``: the clock of the retries."""
        self._monotonic = monotonic
        self._sleep = sleep
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.errors = errors if errors is not None else ConnectionErrors()
        config: dict[str, Any] = {**client_config(bootstrap, client_id, timeout_s, properties),
                                  "error_cb": self.errors}
        self.client = AdminClient(config)

    # ------------------------------------------------------------------------------ waiting
    def result(self, future: concurrent.futures.Future[Any], subject: str, api: str) -> Any:
        """The result of one future about ``subject`` (from Kafka request ``api``), or the
        ``KafkaClientError`` it failed with."""
        try:
            return future.result(timeout=self.timeout_s + FUTURE_GRACE_S)
        except KafkaException as exc:
            raise KafkaClientError.of(exc, subject, api) from None
        except concurrent.futures.TimeoutError:
            raise KafkaClientError(
                "_TIMED_OUT", f"no answer about {subject} within {self.timeout_s:g}s",
                subject=subject, api=api, timed_out=True, bootstrap=self.bootstrap,
                timeout_s=self.timeout_s) from None

    def _each(self, futures: Mapping[str, concurrent.futures.Future[Any]], subject: str,
              api: str) -> dict[str, KafkaClientError | None]:
        """Per name (topic, group): None when its future succeeded, else its error;
        ``subject`` is formatted with the name's repr (``"topic {}"``)."""
        out: dict[str, KafkaClientError | None] = {}
        for name, future in futures.items():
            try:
                self.result(future, subject.format(repr(name)), api)
            except KafkaClientError as exc:
                out[name] = exc
            else:
                out[name] = None
        return out

    # ------------------------------------------------------------------------------ metadata
    def metadata(self, timeout_s: float | None = None) -> ClusterMetadata:
        """Every topic's metadata (Metadata), within ``timeout_s`` (default: the client's)."""
        return cluster_metadata(self.client, self.bootstrap,
                                self.timeout_s if timeout_s is None else timeout_s,
                                self.errors)

    def topic(self, name: str, metadata: ClusterMetadata | None = None) -> TopicMetadata:
        """``name``'s metadata (from ``metadata`` when given); UNKNOWN_TOPIC_OR_PARTITION when
        the cluster does not have it."""
        return topic_of(metadata if metadata is not None else self.metadata(), name)

    def describe_cluster(self) -> Any:
        """DescribeCluster: cluster id, controller, nodes."""
        return self.result(self.client.describe_cluster(request_timeout=self.timeout_s),
                           "the cluster", "DescribeCluster")

    # -------------------------------------------------------------------------------- topics
    def create_topics(self, topics: Sequence[NewTopic]) -> dict[str, KafkaClientError | None]:
        """CreateTopics; per topic None (created) or its error."""
        futures = self.client.create_topics(list(topics), request_timeout=self.timeout_s)
        return self._each(futures, "topic {}", "CreateTopics")

    def create_topic(self, topic: NewTopic) -> None:
        """CreateTopics of one topic."""
        error = self.create_topics([topic])[topic.topic]
        if error is not None:
            raise error

    def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaClientError | None]:
        """DeleteTopics; per topic None (deleted) or its error."""
        if not names:
            return {}
        futures = self.client.delete_topics(list(names), request_timeout=self.timeout_s)
        return self._each(futures, "topic {}", "DeleteTopics")

    def delete_topic(self, name: str) -> None:
        """DeleteTopics of one topic."""
        error = self.delete_topics([name])[name]
        if error is not None:
            raise error

    def create_partitions(self, topic: str, total: int) -> None:
        """CreatePartitions: grow ``topic`` to ``total`` partitions."""
        futures = self.client.create_partitions([NewPartitions(topic, total)],
                                                request_timeout=self.timeout_s)
        self.result(futures[topic], f"topic {topic!r}", "CreatePartitions")

    def alter_topic_configs(self, topic: str, set_config: Mapping[str, str],
                            delete: Iterable[str] = ()) -> None:
        """IncrementalAlterConfigs: set ``set_config``, delete (back to the default)
        ``delete``."""
        self._alter_configs("topic", topic, set_config, delete, f"topic {topic!r}")

    def alter_group_configs(self, group: str, set_config: Mapping[str, str],
                            delete: Iterable[str] = ()) -> None:
        """IncrementalAlterConfigs of a group's configs (KIP-848: its consumer timeouts)."""
        self._alter_configs("group", group, set_config, delete, f"group {group!r}")

    def _alter_configs(self, resource_type: str, name: str, set_config: Mapping[str, str],
                       delete: Iterable[str], subject: str) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_config.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in dict.fromkeys(delete)]
        resource = ConfigResource(resource_type, name, incremental_configs=entries)
        futures = self.client.incremental_alter_configs([resource],
                                                        request_timeout=self.timeout_s)
        self.result(futures[resource], subject, "IncrementalAlterConfigs")

    def topic_configs(self, topic: str) -> Mapping[str, ConfigEntry]:
        """DescribeConfigs of a topic: every config, with its source."""
        return self._describe_configs(ConfigResource("topic", topic), f"topic {topic!r}")

    def group_configs(self, group: str) -> Mapping[str, ConfigEntry]:
        """DescribeConfigs of a group: every group config, with its source (GROUP_CONFIG
        where set on the group, else DEFAULT_CONFIG)."""
        return self._describe_configs(ConfigResource("group", group), f"group {group!r}")

    def broker_configs(self, broker_id: int) -> Mapping[str, ConfigEntry]:
        """DescribeConfigs of a broker: every config, with its source."""
        return self._describe_configs(ConfigResource("broker", str(broker_id)),
                                      f"broker {broker_id}")

    def _describe_configs(self, resource: ConfigResource, subject: str
                          ) -> Mapping[str, ConfigEntry]:
        futures = self.client.describe_configs([resource], request_timeout=self.timeout_s)
        entries: Mapping[str, ConfigEntry] = self.result(futures[resource], subject,
                                                         "DescribeConfigs")
        return entries

    def list_offsets(self, partitions: Iterable[PartitionKey], at: OffsetAt
                     ) -> dict[PartitionKey, int]:
        """ListOffsets of ``partitions`` (-1: no offset, e.g. no record after a timestamp).

        As Kafka's admin client, a partition answered with an error of metadata not yet
        everywhere (``LIST_OFFSETS_RETRIABLE``: a topic just created whose leader has not
        taken it up, a leader moving) is asked again after ``RETRY_BACKOFF_S``, for at most
        ``LIST_OFFSETS_RETRY_S`` (or ``timeout_s`` if shorter); then its error is raised."""
        spec = offset_spec(at)
        pending = list(dict.fromkeys(TopicPartition(t, p) for t, p in partitions))
        out: dict[PartitionKey, int] = {}
        deadline = self._monotonic() + min(self.timeout_s, LIST_OFFSETS_RETRY_S)
        while pending:
            futures = self.client.list_offsets({tp: spec for tp in pending},
                                               request_timeout=self.timeout_s)
            retry: list[TopicPartition] = []
            for tp, future in futures.items():
                try:
                    found = self.result(future, f"partition {tp.topic}-{tp.partition}",
                                        "ListOffsets")
                except KafkaClientError as exc:
                    if (exc.name not in LIST_OFFSETS_RETRIABLE
                            or self._monotonic() + RETRY_BACKOFF_S > deadline):
                        raise
                    retry.append(tp)
                else:
                    out[(tp.topic, tp.partition)] = int(found.offset)
            if retry:
                self._sleep(RETRY_BACKOFF_S)
            pending = retry
        return out

    # ------------------------------------------------------------------------ consumer groups
    def list_consumer_groups(self) -> Any:
        """ListGroups: ``.valid`` holds the groups' listings. As Kafka's
        ``ListConsumerGroupsResult.all()`` (and ``kafka-consumer-groups --list``), a broker that
        did not answer fails the listing rather than leaving its groups out of it."""
        subject = "the consumer groups"
        answer = self.result(self.client.list_consumer_groups(request_timeout=self.timeout_s),
                             subject, "ListGroups")
        if answer.errors:
            raise KafkaClientError.of(answer.errors[0], subject, "ListGroups")
        return answer

    def describe_consumer_group(self, group: str, must_exist: bool = True
                                ) -> ConsumerGroupDescription:
        """DescribeGroups of one group; with ``must_exist`` a group the coordinator does not
        know (state Dead) is GROUP_ID_NOT_FOUND."""
        futures = self.client.describe_consumer_groups([group], request_timeout=self.timeout_s)
        subject = f"group {group!r}"
        description: ConsumerGroupDescription = self.result(futures[group], subject,
                                                            "DescribeGroups")
        if must_exist and description.state == ConsumerGroupState.DEAD:
            raise KafkaClientError("GROUP_ID_NOT_FOUND",
                                   f"consumer group {group!r} does not exist",
                                   subject="", api="DescribeGroups")
        return description

    def committed_offsets(self, group: str) -> dict[PartitionKey, int]:
        """OffsetFetch of every partition ``group`` has committed offsets for."""
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s)
        answer = self.result(futures[group], f"the offsets of group {group!r}", "OffsetFetch")
        return committed_offsets(answer.topic_partitions)

    def alter_consumer_group_offsets(self, group: str,
                                     offsets: Mapping[PartitionKey, int]) -> None:
        """OffsetCommit of ``offsets`` for ``group``; the first partition refused is raised."""
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, offset) for (t, p), offset in offsets.items()])
        futures = self.client.alter_consumer_group_offsets([request],
                                                           request_timeout=self.timeout_s)
        answer = self.result(futures[group], f"the offsets of group {group!r}", "OffsetCommit")
        for tp in answer.topic_partitions:
            if tp.error is not None:
                raise KafkaClientError.of(tp.error, f"partition {tp.topic}-{tp.partition}",
                                          "OffsetCommit")

    def delete_consumer_groups(self, groups: Sequence[str]
                               ) -> dict[str, KafkaClientError | None]:
        """DeleteGroups; per group None (deleted) or its error (GROUP_NOT_EMPTY...)."""
        futures = self.client.delete_consumer_groups(list(groups),
                                                     request_timeout=self.timeout_s)
        return self._each(futures, "group {}", "DeleteGroups")
