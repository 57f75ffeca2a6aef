"""Real clients negotiate the admin APIs at the newest version both sides speak.

One broker advertises a ``VersionRecorder`` relay, so every request of every client connection is
seen on the wire. Each client (confluent-kafka / librdkafka, kafka-python, aiokafka) runs the
admin calls it has — create topics, describe and alter configs, add partitions, delete records,
describe the cluster, ACLs (the broker has no authorizer: SECURITY_DISABLED, answered, not
dropped), delete topics — and an idempotent producer (InitProducerId). For each API the test
prints the versions sent and asserts each is ``min(client's newest, broker's newest)``.

The clients' newest versions: kafka-python and aiokafka from their request classes (kafka-python's
producer caps InitProducerId at v4); librdkafka's
are the constants its ``rd_kafka_broker_ApiVersion_supported`` calls pass (src/rdkafka_request.c
and rdkafka_admin.c), written below.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey

from ..broker_process import BrokerProcess, running_broker
from .version_recorder import VersionRecorder

pytestmark = pytest.mark.integration

TIMEOUT_S: Final = 30
BOOTSTRAP_TIMEOUT_MS: Final = 15_000

LIBRDKAFKA_NEWEST: Final = {
    ApiKey.API_VERSIONS: 3, ApiKey.CREATE_TOPICS: 4, ApiKey.DELETE_TOPICS: 4,
    ApiKey.CREATE_PARTITIONS: 2, ApiKey.DESCRIBE_CONFIGS: 1, ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1, ApiKey.DELETE_RECORDS: 2, ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.DESCRIBE_ACLS: 2, ApiKey.CREATE_ACLS: 2, ApiKey.DELETE_ACLS: 2,
}


@pytest.fixture(scope="module")
def recorded_broker(tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[BrokerProcess, VersionRecorder]]:
    recorder = VersionRecorder()
    overrides = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{recorder.port}"}
    try:
        with running_broker(tmp_path_factory.mktemp("broker"), overrides) as broker:
            recorder.target_port = broker.port
            yield broker, recorder
    finally:
        recorder.close()


def check_newest(client: str, recorder: VersionRecorder, newest: dict[ApiKey, int]) -> None:
    """Print what was sent per API; assert it is the newest version both sides speak."""
    served = served_versions()
    sent = recorder.versions(newest)
    expected = {key.name: {min(client_max, served[key].max_version)}
                for key, client_max in newest.items()}
    for name in sorted(sent):
        print(f"{client}: {name} v{sorted(sent[name])} (expected v{sorted(expected[name])})")
    assert sent == expected


def run_with_deadline(call: Callable[[], Any]) -> Any:
    """``call`` in a worker thread, failed if it outlives ``TIMEOUT_S``."""
    async def bounded() -> Any:
        return await asyncio.wait_for(asyncio.to_thread(call), TIMEOUT_S)
    return asyncio.run(bounded())


# ----------------------------------------------------------------------------- kafka-python


def kafka_python_calls(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        AlterConfigOp,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import KafkaError, SecurityDisabledError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "600000"})])
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        (described,) = admin.describe_configs([resource])
        assert described is not None
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                             configs={"retention.ms": "1200000"})],
                            incremental=False)
        admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic,
            configs={"retention.ms": (AlterConfigOp.SET, "1800000")})], incremental=True)
        admin.create_partitions({topic: NewPartitions(2)})
        producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                 acks="all")
        producer.send(topic, b"v", partition=0).get(timeout=10)
        producer.close()
        admin.delete_records({TopicPartition(topic, 0): -1})
        admin.describe_cluster()
        acl_filter = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(
                                   ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(acl_filter)
        acl = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, topic,
                                                   ACLResourcePatternType.LITERAL))
        for call in (lambda: admin.create_acls([acl]), lambda: admin.delete_acls([acl_filter]),
                     lambda: admin.list_partition_reassignments(),
                     lambda: admin.describe_user_scram_credentials()):
            # SECURITY_DISABLED / nothing to list: answered, not dropped.
            with contextlib.suppress(KafkaError):
                call()
        admin.delete_topics([topic])
    finally:
        admin.close()


def kafka_python_newest() -> dict[ApiKey, int]:
    from kafka.protocol.admin import acl, cluster, configs, topics
    from kafka.protocol.producer import transaction

    classes = [topics.CreateTopicsRequest, topics.DeleteTopicsRequest,
               topics.CreatePartitionsRequest, topics.DeleteRecordsRequest,
               configs.DescribeConfigsRequest, configs.AlterConfigsRequest,
               cluster.DescribeClusterRequest, acl.DescribeAclsRequest,
               transaction.InitProducerIdRequest]
    newest = {ApiKey(int(c.API_KEY)): int(c.max_version) for c in classes}
    # Its producer caps InitProducerId at v4 (transaction_manager.InitProducerIdHandler).
    newest[ApiKey.INIT_PRODUCER_ID] = min(newest[ApiKey.INIT_PRODUCER_ID], 4)
    return newest


def test_kafka_python(recorded_broker: tuple[BrokerProcess, VersionRecorder]) -> None:
    broker, recorder = recorded_broker
    recorder.requests.clear()
    run_with_deadline(lambda: kafka_python_calls(broker.bootstrap,
                                                 f"versions.kp.{uuid.uuid4().hex[:6]}"))
    check_newest("kafka-python", recorder, kafka_python_newest())
    assert "Traceback" not in broker.log_path.read_text(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------------- confluent-kafka


def confluent_calls(bootstrap: str, topic: str) -> None:
    from confluent_kafka import KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    def wait(futures: Any) -> None:
        for future in (futures.values() if isinstance(futures, dict) else [futures]):
            future.result(timeout=TIMEOUT_S)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait(admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "600000"})]))
    resource = ConfigResource(ResourceType.TOPIC, topic)
    wait(admin.describe_configs([resource]))
    with warnings.catch_warnings():  # deprecated in the client, still an API to serve
        warnings.simplefilter("ignore", DeprecationWarning)
        wait(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                 set_config={"retention.ms": "1200000"})]))
    wait(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(
            "retention.ms", "1800000",
            incremental_operation=AlterConfigOpType.SET)])]))
    wait(admin.create_partitions([NewPartitions(topic, 2)]))
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"v", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    wait(admin.delete_records([TopicPartition(topic, 0, -1)]))
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
    acl_filter = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                  None, None, AclOperation.ANY, AclPermissionType.ANY)
    # librdkafka hands DescribeAcls' top-level SECURITY_DISABLED back as no bindings.
    assert admin.describe_acls(acl_filter).result(timeout=TIMEOUT_S) == []
    for call in (lambda: admin.create_acls([binding]), lambda: admin.delete_acls([acl_filter])):
        with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
            wait(call())
    wait(admin.delete_topics([topic]))


def test_confluent_kafka(recorded_broker: tuple[BrokerProcess, VersionRecorder]) -> None:
    broker, recorder = recorded_broker
    recorder.requests.clear()
    run_with_deadline(lambda: confluent_calls(broker.bootstrap,
                                              f"versions.ck.{uuid.uuid4().hex[:6]}"))
    check_newest("confluent-kafka", recorder, LIBRDKAFKA_NEWEST)


# ------------------------------------------------------------------------------ aiokafka


async def aiokafka_calls(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.admin.records_to_delete import RecordsToDelete

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1,
                                            topic_configs={"retention.ms": "600000"})])
        await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                  configs={"retention.ms": "1200000"})])
        await admin.create_partitions({topic: NewPartitions(2)})
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v", partition=0)
        finally:
            await producer.stop()
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(-1)})
        await admin.delete_topics([topic])
    finally:
        await admin.close()


def aiokafka_newest() -> dict[ApiKey, int]:
    from aiokafka.protocol import admin, transaction

    newest: dict[ApiKey, int] = {}
    for module, name in [(admin, "CreateTopicsRequest"), (admin, "DeleteTopicsRequest"),
                         (admin, "DescribeConfigsRequest"), (admin, "AlterConfigsRequest"),
                         (admin, "CreatePartitionsRequest"), (admin, "DeleteRecordsRequest"),
                         (transaction, "InitProducerIdRequest")]:
        versions = [int(attr.rsplit("_v", 1)[1]) for attr in vars(module)
                    if attr.startswith(name + "_v")]
        newest[ApiKey(int(getattr(module, name).API_KEY))] = max(versions)
    return newest


def test_aiokafka(recorded_broker: tuple[BrokerProcess, VersionRecorder]) -> None:
    broker, recorder = recorded_broker
    recorder.requests.clear()
    topic = f"versions.aio.{uuid.uuid4().hex[:6]}"
    asyncio.run(asyncio.wait_for(aiokafka_calls(broker.bootstrap, topic), TIMEOUT_S))
    check_newest("aiokafka", recorder, aiokafka_newest())
