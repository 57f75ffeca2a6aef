"""``BROKER_SETTINGS``: the table of the broker's own settings, by Kafka's names.

Owns each broker setting's name, default (as text, Kafka's where Kafka has the setting), type
(Kafka's ``ConfigDef.Type``, as DescribeConfigs reports it) and one-line documentation. Pure
data: ``strata.broker.config.BrokerConfig`` reads values against it, DescribeConfigs and the
docs list it. Invariant: every name appears once (``SETTINGS_BY_NAME``); topic-config defaults
(``log.*``) are not here but in ``strata.storage.log_config.TOPIC_CONFIGS``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from strata.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES


class ConfigType(enum.IntEnum):
    """Kafka's ``ConfigDef.Type``, numbered as DescribeConfigs v3 reports it."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class BrokerSetting:
    name: str
    default: str | None
    type: ConfigType
    doc: str


BROKER_SETTINGS: Final[tuple[BrokerSetting, ...]] = (
    BrokerSetting("node.id", "0", ConfigType.INT, "This broker's id in the cluster."),
    BrokerSetting("broker.id", None, ConfigType.INT, "Kafka's older name of node.id."),
    BrokerSetting("cluster.id", None, ConfigType.STRING,
                  "Cluster id; default: the one in meta.properties, else a new one."),
    BrokerSetting("listeners", "PLAINTEXT://127.0.0.1:9092", ConfigType.LIST,
                  "Where the Kafka protocol is served; port 0 picks a free port."),
    BrokerSetting("advertised.listeners", None, ConfigType.LIST,
                  "What clients are told to connect to; default: listeners."),
    BrokerSetting("log.dirs", None, ConfigType.LIST,
                  "Comma-separated data directories; default: log.dir."),
    BrokerSetting("log.dir", "/tmp/strata-logs", ConfigType.STRING,
                  "The data directory when log.dirs is not set."),
    BrokerSetting("num.partitions", "1", ConfigType.INT, "Default partitions of a new topic."),
    BrokerSetting("default.replication.factor", "1", ConfigType.INT,
                  "Default replication factor of a new topic."),
    BrokerSetting("auto.create.topics.enable", "true", ConfigType.BOOLEAN,
                  "Create a topic when Metadata asks for an unknown one."),
    BrokerSetting("delete.topic.enable", "true", ConfigType.BOOLEAN,
                  "Allow DeleteTopics."),
    BrokerSetting("socket.request.max.bytes", str(DEFAULT_SOCKET_REQUEST_MAX_BYTES),
                  ConfigType.INT, "The largest request frame accepted."),
    BrokerSetting("queued.max.requests", "500", ConfigType.INT,
                  "Requests read but not yet handled, across connections, before reading pauses."),
    BrokerSetting("max.incremental.fetch.session.cache.slots", "1000", ConfigType.INT,
                  "At most this many fetch sessions (KIP-227) are cached."),
    BrokerSetting("min.incremental.fetch.session.eviction.ms", "120000", ConfigType.INT,
                  "A fetch session unused this long may be evicted for a new one."),
    BrokerSetting("telemetry.max.bytes", "1048576", ConfigType.INT,
                  "The maximum size (after compression if compression is used) of telemetry "
                  "metrics pushed from a client to the broker (KIP-714)."),
    BrokerSetting("max.request.partition.size.limit", "2000", ConfigType.INT,
                  "At most this many partitions in one DescribeTopicPartitions answer."),
    BrokerSetting("quota.window.num", "11", ConfigType.INT,
                  "Samples a client quota's rate is measured over."),
    BrokerSetting("quota.window.size.seconds", "1", ConfigType.INT,
                  "The time span of each client quota sample."),
    BrokerSetting("replication.quota.window.num", "11", ConfigType.INT,
                  "Samples a replication throttle's rate is measured over (KIP-73)."),
    BrokerSetting("replication.quota.window.size.seconds", "1", ConfigType.INT,
                  "The time span of each replication throttle sample."),
    BrokerSetting("http.port", "9404", ConfigType.INT,
                  "Port of /healthz, /readyz and /metrics; 0 picks a free port."),
    BrokerSetting("strata.max.partitions.per.broker", None, ConfigType.INT,
                  "At most this many partition replicas on this broker (it can only lower the "
                  "capacity the open file limit allows); CreateTopics, CreatePartitions and "
                  "auto-creation beyond it answer POLICY_VIOLATION."),
    BrokerSetting("metadata.store", None, ConfigType.STRING,
                  "sqlite:///path, etcd://host:port,... or etcds://host:port,... (etcd over "
                  "TLS): the cluster's metadata store. Unset: a single broker keeping its "
                  "topics in its first log dir."),
    BrokerSetting("metadata.store.ssl.cafile", None, ConfigType.STRING,
                  "PEM CA bundle that signed etcd's server certificate (etcds:// only; unset: "
                  "the system's roots). Kafka's zookeeper.ssl.truststore.location, as PEM."),
    BrokerSetting("metadata.store.ssl.certfile", None, ConfigType.STRING,
                  "PEM certificate chain this broker presents to an etcd started with "
                  "--client-cert-auth (with metadata.store.ssl.keyfile)."),
    BrokerSetting("metadata.store.ssl.keyfile", None, ConfigType.STRING,
                  "PEM private key of metadata.store.ssl.certfile (unencrypted)."),
    # The cluster (cluster_*.py, controller.py), with KRaft's names where Kafka has one.
    BrokerSetting("broker.session.timeout.ms", "9000", ConfigType.INT,
                  "TTL of a broker's registration lease: a broker silent this long is dead."),
    BrokerSetting("controlled.shutdown.enable", "true", ConfigType.BOOLEAN,
                  "Move leadership away before a broker shuts down."),
    BrokerSetting("auto.leader.rebalance.enable", "true", ConfigType.BOOLEAN,
                  "The controller moves leadership back to preferred replicas."),
    BrokerSetting("leader.imbalance.check.interval.seconds", "300", ConfigType.LONG,
                  "How often the controller checks for non-preferred leaders."),
    BrokerSetting("replica.fetch.wait.max.ms", "500", ConfigType.INT,
                  "A follower's fetch max wait."),
    BrokerSetting("replica.fetch.min.bytes", "1", ConfigType.INT,
                  "A follower's fetch min bytes."),
    BrokerSetting("replica.fetch.max.bytes", "1048576", ConfigType.INT,
                  "A follower's fetch max bytes per partition."),
    BrokerSetting("replica.fetch.response.max.bytes", "10485760", ConfigType.INT,
                  "A follower's fetch max bytes per response."),
    BrokerSetting("replica.fetch.backoff.ms", "1000", ConfigType.INT,
                  "How long a follower waits after a failed fetch."),
    BrokerSetting("replica.socket.timeout.ms", "30000", ConfigType.INT,
                  "A follower's request timeout towards the leader."),
    BrokerSetting("num.recovery.threads.per.data.dir", "2", ConfigType.INT,
                  "Threads per log dir loading partitions at startup."),
    # Kafka's default is Long.MAX_VALUE (flush only by flush.messages inline); Strata's storage
    # checks flush.messages / flush.ms on this schedule, in a worker thread.
    BrokerSetting("log.flush.scheduler.interval.ms", "1000", ConfigType.LONG,
                  "How often logs are checked for a due fsync."),
    BrokerSetting("log.flush.offset.checkpoint.interval.ms", "60000", ConfigType.INT,
                  "How often the recovery-point checkpoint is written."),
    BrokerSetting("log.flush.start.offset.checkpoint.interval.ms", "60000", ConfigType.INT,
                  "How often the log-start-offset checkpoint is written."),
    BrokerSetting("replica.high.watermark.checkpoint.interval.ms", "5000", ConfigType.LONG,
                  "How often the high watermarks are written to replication-offset-checkpoint "
                  "(where a restarted broker's high watermarks come from)."),
    BrokerSetting("log.retention.check.interval.ms", "300000", ConfigType.LONG,
                  "How often retention deletes old segments."),
    BrokerSetting("producer.id.expiration.ms", "86400000", ConfigType.INT,
                  "How long an idle idempotent producer's state is kept."),
    BrokerSetting("producer.id.expiration.check.interval.ms", "600000", ConfigType.INT,
                  "How often expired producer ids are removed."),
    BrokerSetting("broker.rack", "", ConfigType.STRING,
                  "The rack of this broker, for rack-aware replica placement (empty: none)."),
    # Replication (partition.py, replica_manager.py).
    BrokerSetting("replica.lag.time.max.ms", "30000", ConfigType.LONG,
                  "A follower not caught up with the leader for this long leaves the ISR."),
    # The group coordinator (group_coordinator.py) and its topic __consumer_offsets.
    BrokerSetting("group.min.session.timeout.ms", "6000", ConfigType.INT,
                  "The smallest session.timeout.ms a consumer may join a group with."),
    BrokerSetting("group.max.session.timeout.ms", "1800000", ConfigType.INT,
                  "The largest session.timeout.ms a consumer may join a group with."),
    BrokerSetting("group.initial.rebalance.delay.ms", "3000", ConfigType.INT,
                  "How long the first rebalance of an empty group waits for more members."),
    BrokerSetting("group.max.size", "2147483647", ConfigType.INT,
                  "The most members a group may have."),
    # The consumer groups of KIP-848 (group/consumer_group_coordinator.py).
    BrokerSetting("group.consumer.session.timeout.ms", "45000", ConfigType.INT,
                  "A consumer group member is removed after this long without a heartbeat."),
    BrokerSetting("group.consumer.min.session.timeout.ms", "45000", ConfigType.INT,
                  "Lower bound of group.consumer.session.timeout.ms."),
    BrokerSetting("group.consumer.max.session.timeout.ms", "60000", ConfigType.INT,
                  "Upper bound of group.consumer.session.timeout.ms."),
    BrokerSetting("group.consumer.heartbeat.interval.ms", "5000", ConfigType.INT,
                  "How often consumer group members are told to heartbeat."),
    BrokerSetting("group.consumer.min.heartbeat.interval.ms", "5000", ConfigType.INT,
                  "Lower bound of group.consumer.heartbeat.interval.ms."),
    BrokerSetting("group.consumer.max.heartbeat.interval.ms", "15000", ConfigType.INT,
                  "Upper bound of group.consumer.heartbeat.interval.ms."),
    BrokerSetting("group.consumer.max.size", "2147483647", ConfigType.INT,
                  "The most members a consumer group may have."),
    BrokerSetting("group.consumer.assignors", "uniform,range", ConfigType.LIST,
                  "The server-side assignors (names or Kafka's class names); the first is "
                  "the default."),
    BrokerSetting("group.consumer.migration.policy", "bidirectional", ConfigType.STRING,
                  "Online migration between classic and consumer groups: bidirectional, "
                  "upgrade, downgrade or disabled."),
    BrokerSetting("offsets.topic.num.partitions", "50", ConfigType.INT,
                  "Partitions of __consumer_offsets (fixed once the topic exists)."),
    BrokerSetting("offsets.topic.replication.factor", "3", ConfigType.INT,
                  "Replication factor of __consumer_offsets, capped at the live brokers."),
    BrokerSetting("offsets.topic.segment.bytes", "104857600", ConfigType.INT,
                  "segment.bytes of __consumer_offsets."),
    BrokerSetting("offsets.retention.minutes", "10080", ConfigType.INT,
                  "How long committed offsets of a group without members are kept."),
    BrokerSetting("offsets.retention.check.interval.ms", "600000", ConfigType.LONG,
                  "How often expired offsets are removed."),
    BrokerSetting("offset.metadata.max.bytes", "4096", ConfigType.INT,
                  "The largest metadata string an offset commit may carry."),
    BrokerSetting("offsets.commit.timeout.ms", "5000", ConfigType.INT,
                  "How long the group coordinator waits for its writes to reach every in-sync "
                  "replica of __consumer_offsets before it answers COORDINATOR_NOT_AVAILABLE."),
    # The transaction coordinator (strata.broker.transaction) and its topic __transaction_state.
    BrokerSetting("transaction.state.log.num.partitions", "50", ConfigType.INT,
                  "Partitions of __transaction_state (fixed once the topic exists)."),
    BrokerSetting("transaction.state.log.replication.factor", "3", ConfigType.SHORT,
                  "Replication factor of __transaction_state, capped at the live brokers."),
    BrokerSetting("transaction.state.log.min.isr", "2", ConfigType.INT,
                  "min.insync.replicas of __transaction_state."),
    BrokerSetting("transaction.state.log.segment.bytes", "104857600", ConfigType.INT,
                  "segment.bytes of __transaction_state."),
    BrokerSetting("transaction.max.timeout.ms", "900000", ConfigType.INT,
                  "The largest transaction.timeout.ms a producer may ask for "
                  "(INVALID_TRANSACTION_TIMEOUT above it)."),
    BrokerSetting("transactional.id.expiration.ms", "604800000", ConfigType.INT,
                  "A transactional id without a transaction this long is forgotten."),
    BrokerSetting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000",
                  ConfigType.INT, "How often transactions past their timeout are aborted."),
    BrokerSetting("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000",
                  ConfigType.INT, "How often expired transactional ids are removed."),
    BrokerSetting("transaction.version", "2", ConfigType.SHORT,
                  "The transaction.version feature level in use (Kafka finalizes it with "
                  "kafka-features.sh): 0 = transactions v1, 1 = flexible __transaction_state "
                  "values, 2 = transactions v2 (KIP-890, the epoch bumped at every EndTxn)."),
    BrokerSetting("transaction.partition.verification.enable", "true", ConfigType.BOOLEAN,
                  "Partition leaders ask the transaction coordinator whether a transactional "
                  "produce's partition is in the transaction before appending it (KIP-890: "
                  "no hanging transactions)."),
    # Security (strata.broker.security). Any of the ssl.* / sasl.* keys may also be set per
    # listener as listener.name.<name>.<key> (Kafka's rule; those keys are always known).
    BrokerSetting("listener.security.protocol.map",
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  ConfigType.STRING,
                  "Listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    BrokerSetting("inter.broker.listener.name", None, ConfigType.STRING,
                  "The listener followers fetch from; default: by security.inter.broker.protocol."),
    BrokerSetting("security.inter.broker.protocol", "PLAINTEXT", ConfigType.STRING,
                  "The inter-broker listener's protocol when inter.broker.listener.name is unset."),
    BrokerSetting("sasl.mechanism.inter.broker.protocol", None, ConfigType.STRING,
                  "The SASL mechanism a follower logs in to a SASL inter-broker listener with."),
    BrokerSetting("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", ConfigType.LIST,
                  "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, "
                  "GSSAPI, is not served)."),
    BrokerSetting("sasl.jaas.config", None, ConfigType.PASSWORD,
                  "A login module line with this broker's username=\"..\" password=\"..\"."),
    BrokerSetting("connection.failed.authentication.delay.ms", "100", ConfigType.INT,
                  "How long a connection whose authentication failed stays open."),
    BrokerSetting("ssl.keystore.type", "PEM", ConfigType.STRING, "PEM only."),
    BrokerSetting("ssl.keystore.location", None, ConfigType.STRING,
                  "A PEM file with this broker's certificate chain and private key."),
    BrokerSetting("ssl.keystore.certificate.chain", None, ConfigType.PASSWORD,
                  "The certificate chain as PEM text (with ssl.keystore.key)."),
    BrokerSetting("ssl.keystore.key", None, ConfigType.PASSWORD, "The private key as PEM text."),
    BrokerSetting("ssl.key.password", None, ConfigType.PASSWORD,
                  "The password of an encrypted private key."),
    BrokerSetting("ssl.truststore.type", "PEM", ConfigType.STRING, "PEM only."),
    BrokerSetting("ssl.truststore.location", None, ConfigType.STRING,
                  "A PEM file of the CA certificates trusted for peers."),
    BrokerSetting("ssl.truststore.certificates", None, ConfigType.PASSWORD,
                  "The trusted CA certificates as PEM text."),
    BrokerSetting("ssl.client.auth", "none", ConfigType.STRING,
                  "Client certificates: required, requested or none."),
    BrokerSetting("ssl.endpoint.identification.algorithm", "https", ConfigType.STRING,
                  "https: a follower checks the leader's host name against its certificate."),
    # Authorization (strata.broker.security.authorization).
    BrokerSetting("authorizer.class.name", None, ConfigType.STRING,
                  "Enables ACLs: org.apache.kafka.metadata.authorizer.StandardAuthorizer, "
                  "kafka.security.authorizer.AclAuthorizer or strata.acl; unset: all allowed."),
    BrokerSetting("super.users", None, ConfigType.STRING,
                  "Principals allowed everything, separated by semicolons (User:admin;User:b)."),
    BrokerSetting("allow.everyone.if.no.acl.found", "false", ConfigType.BOOLEAN,
                  "With an authorizer: allow a resource that no ACL names at all."),
)

SETTINGS_BY_NAME: Final[Mapping[str, BrokerSetting]] = {s.name: s for s in BROKER_SETTINGS}
