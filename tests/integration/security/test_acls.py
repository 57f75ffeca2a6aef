"""ACLs on one broker with ``authorizer.class.name``, driven by unchanged Kafka clients.

One broker for the module: PLAINTEXT (its health port; ``User:ANONYMOUS`` has no ACLs, so it
is refused everything) and SASL_PLAINTEXT with SCRAM users ``admin`` (in ``super.users``),
``alice`` and ``bob``. ACLs are created through confluent-kafka's and kafka-python's admin
clients (CreateAcls/DescribeAcls/DeleteAcls) and through ``strata acls`` writing the broker's
``acls.json`` while it runs. Every wait polls a condition against a deadline.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ACL, ACLFilter, ResourcePattern, ResourcePatternFilter
from kafka.admin import ACLOperation as KpOperation
from kafka.admin import ACLPermissionType as KpPermission
from kafka.admin import ACLResourcePatternType as KpPatternType
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

from ..broker_process import (
    GROUPS_CONFIG,
    STRATA,
    BrokerProcess,
    create_user,
    free_port,
    serving,
)
from .conftest import SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT_S = 20.0
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
T = TypeVar("T")


class AclBroker:
    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process = process
        self.bootstrap = f"127.0.0.1:{sasl_port}"

    def confluent(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                "sasl.password": PASSWORDS[user]}

    def kafka_python(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                "sasl_plain_password": PASSWORDS[user]}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.confluent(user))


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    broker = BrokerProcess(tmp_path_factory.mktemp("acl-broker"))
    port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}"
    broker.config.update({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "num.partitions": "1", **GROUPS_CONFIG})
    for user, password in PASSWORDS.items():
        create_user(user, password, "--log-dir", str(broker.data_dir))
    with serving(broker):
        yield AclBroker(broker, port)


def _wait(condition: Callable[[], T], what: str) -> T:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {TIMEOUT_S}s: {what}")


def _topics(broker: AclBroker, *names: str) -> None:
    admin = broker.admin()  # kept alive until the futures are done
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names])
    for future in futures.values():
        future.result(TIMEOUT_S)


def _allow(broker: AclBroker, *bindings: AclBinding) -> None:
    admin = broker.admin()
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT_S)


def _binding(rtype: ResourceType, name: str, principal: str, op: AclOperation,
             permission: AclPermissionType = AclPermissionType.ALLOW,
             pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def _produce(broker: AclBroker, user: str, topic: str) -> KafkaError | None:
    producer = Producer({**broker.confluent(user), "message.timeout.ms": 10000})
    results: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return results[0]


def test_prefixed_write_allows_only_matching_topics(acl_broker: AclBroker) -> None:
    suffix = uuid.uuid4().hex[:6]
    ours, other = f"orders-{suffix}", f"payments-{suffix}"
    _topics(acl_broker, ours, other)
    _allow(acl_broker, _binding(ResourceType.TOPIC, "orders-", "User:alice",
                                AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))
    assert _produce(acl_broker, "alice", ours) is None
    refused = _produce(acl_broker, "alice", other)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python: idempotent by default (InitProducerId: Write on some topic suffices)
    producer = KafkaProducer(**acl_broker.kafka_python("alice"), request_timeout_ms=10000)
    try:
        producer.send(ours, b"kp").get(TIMEOUT_S)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(other, b"kp").get(TIMEOUT_S)
    finally:
        producer.close(5)
    assert _produce(acl_broker, "admin", other) is None  # a super user needs no ACL


def test_metadata_hides_topics_the_principal_may_not_describe(acl_broker: AclBroker) -> None:
    suffix = uuid.uuid4().hex[:6]
    seen, hidden = f"visible-{suffix}", f"hidden-{suffix}"
    _topics(acl_broker, seen, hidden)
    _allow(acl_broker, _binding(ResourceType.TOPIC, seen, "User:bob", AclOperation.DESCRIBE))
    topics = set(acl_broker.admin("bob").list_topics(timeout=TIMEOUT_S).topics)
    assert seen in topics and hidden not in topics
    everything = set(acl_broker.admin().list_topics(timeout=TIMEOUT_S).topics)
    assert {seen, hidden} <= everything


def _consume_error(broker: AclBroker, user: str, topic: str, group: str) -> int | None:
    """The first error code a subscribed consumer meets (None: it read a record)."""
    consumer = Consumer({**broker.confluent(user), "group.id": group,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                return None
            if error.code() != KafkaError._PARTITION_EOF:
                return int(error.code())
        raise AssertionError(f"{user} neither read nor failed on {topic} in {TIMEOUT_S}s")
    finally:
        consumer.close()


def test_consumer_needs_read_on_its_group_and_cli_grants_it(acl_broker: AclBroker) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"events-{suffix}", f"readers-{suffix}"
    _topics(acl_broker, topic)
    assert _produce(acl_broker, "admin", topic) is None
    _allow(acl_broker, _binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ))
    assert _consume_error(acl_broker, "bob", topic, group) == \
        KafkaError.GROUP_AUTHORIZATION_FAILED
    # ``strata acls`` writes acls.json of the running broker, which picks it up.
    done = subprocess.run([str(STRATA), "acls", "add", "--principal", "User:bob",
                           "--operation", "Read", "--group", group, "--log-dir",
                           str(acl_broker.process.data_dir)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"Group:LITERAL:{group}" in done.stdout
    listed = subprocess.run([str(STRATA), "acls", "list", "--group", group, "--format", "json",
                             "--log-dir", str(acl_broker.process.data_dir)],
                            capture_output=True, text=True, timeout=60, check=True)
    assert [json.loads(line)["principal"] for line in listed.stdout.splitlines()] == \
        ["User:bob"]

    admin = acl_broker.admin()

    def bob_may_describe_group() -> bool:
        found = admin.describe_acls(AclBindingFilter(
            ResourceType.GROUP, group, ResourcePatternType.LITERAL, None, None,
            AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT_S)
        return len(found) == 1

    _wait(bob_may_describe_group, "the CLI's ACL seen by the broker")
    assert _consume_error(acl_broker, "bob", topic, group) is None


def test_deny_beats_allow(acl_broker: AclBroker) -> None:
    topic = f"audit-{uuid.uuid4().hex[:6]}"
    _topics(acl_broker, topic)
    _allow(acl_broker,
           _binding(ResourceType.TOPIC, "audit-", "User:alice", AclOperation.WRITE,
                    pattern=ResourcePatternType.PREFIXED),
           _binding(ResourceType.TOPIC, topic, "User:*", AclOperation.WRITE,
                    AclPermissionType.DENY))
    refused = _produce(acl_broker, "alice", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(acl_broker, "admin", topic) is None


def test_acl_apis_with_confluent_admin(acl_broker: AclBroker) -> None:
    principal = f"User:carol-{uuid.uuid4().hex[:6]}"
    admin = acl_broker.admin()
    bindings = [_binding(ResourceType.TOPIC, "reports-", principal, AclOperation.READ,
                         pattern=ResourcePatternType.PREFIXED),
                _binding(ResourceType.GROUP, "reporting", principal, AclOperation.READ)]
    _allow(acl_broker, *bindings)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal,
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(everything).result(TIMEOUT_S))) == \
        sorted(map(str, bindings))
    matching = AclBindingFilter(ResourceType.TOPIC, "reports-eu", ResourcePatternType.MATCH,
                                principal, None, AclOperation.ANY, AclPermissionType.ANY)
    assert [str(b) for b in admin.describe_acls(matching).result(TIMEOUT_S)] == \
        [str(bindings[0])]
    # not a super user, no Alter on the Cluster: refused (librdkafka drops DescribeAcls'
    # top-level error, so the refusal is shown on CreateAcls, whose errors are per creation)
    alice = acl_broker.admin("alice")
    mine = _binding(ResourceType.TOPIC, "alice-", "User:alice", AclOperation.ALL,
                    pattern=ResourcePatternType.PREFIXED)
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([mine])[mine].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deleted = admin.delete_acls([everything])[everything].result(TIMEOUT_S)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings))
    assert admin.describe_acls(everything).result(TIMEOUT_S) == []
    invalid = _binding(ResourceType.BROKER, "not-the-cluster", principal, AclOperation.ALTER)
    with pytest.raises(KafkaException) as bad:
        admin.create_acls([invalid])[invalid].result(TIMEOUT_S)
    assert bad.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_acl_apis_with_kafka_python_admin(acl_broker: AclBroker) -> None:
    principal = f"User:dave-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(**acl_broker.kafka_python("admin"), request_timeout_ms=10000)
    try:
        acl = ACL(principal, "*", KpOperation.WRITE, KpPermission.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, "metrics", KpPatternType.LITERAL))
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        flt = ACLFilter(principal, None, KpOperation.ANY, KpPermission.ANY,
                        ResourcePatternFilter(KpResourceType.ANY, None, KpPatternType.ANY))
        found, error = admin.describe_acls(flt)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name)
                for a in found] == [(principal, KpOperation.WRITE, "metrics")]
        [(_, deleted, error)] = admin.delete_acls([flt])
        assert error.errno == 0 and len(deleted) == 1
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()
    alice = KafkaAdminClient(**acl_broker.kafka_python("alice"), request_timeout_ms=10000)
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(flt)
    finally:
        alice.close()


def test_acl_apis_without_an_authorizer_are_security_disabled(
        secure_broker: SecureBroker) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_plaintext}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "alice", "sasl.password": "alice-secret"})
    binding = _binding(ResourceType.TOPIC, "t", "User:alice", AclOperation.READ)
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([binding])[binding].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
