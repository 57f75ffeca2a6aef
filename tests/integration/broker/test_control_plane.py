"""The broker's control plane against real clients: a ``python -m strata.broker`` subprocess on
loopback, driven by kafka-python's KafkaAdminClient, confluent-kafka's AdminClient (librdkafka)
and aiokafka's admin client, plus raw sockets for the protocol edge cases."""

from __future__ import annotations

import asyncio
import socket
import struct
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_response, encode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import build_request
from strata.storage.log_manager import CLEAN_SHUTDOWN_FILE

from ..broker_process import STRATA, BrokerProcess, running_broker
from ..raw_socket import closed_by_broker, read_frame

# kafka-python's package import emits a DeprecationWarning (importlib.resources.read_text);
# the suite turns warnings into errors.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AIONewTopic
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType as KPConfigResourceType
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KPNewPartitions
    from kafka.admin import NewTopic as KPNewTopic
    from kafka.errors import (
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidTopicError,
        TopicAlreadyExistsError,
    )
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENT_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("control-plane"),
                        {"auto.create.topics.enable": "true", "num.partitions": "2"}) as b:
        yield b


@pytest.fixture
def kafka_python(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield admin
    admin.close()


@pytest.fixture
def confluent(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


# ------------------------------------------------------------------ raw protocol helpers


def raw_connection(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=CLIENT_TIMEOUT_S)
    sock.settimeout(CLIENT_TIMEOUT_S)
    return sock


def api_versions_v3(sock: socket.socket, correlation_id: int) -> list[int]:
    header = RequestHeader(ApiKey.API_VERSIONS, 3, correlation_id, "raw")
    body = build_request(ApiKey.API_VERSIONS, 3, client_software_name="raw",
                         client_software_version="1")
    sock.sendall(encode_request(header, body))
    got_id, response = decode_response(read_frame(sock), ApiKey.API_VERSIONS, 3)
    assert got_id == correlation_id and response.error_code == ErrorCode.none
    return [int(k.api_key) for k in response.api_keys]


# ------------------------------------------------------------------ kafka-python


def test_kafka_python_topic_lifecycle(kafka_python: KafkaAdminClient) -> None:
    kafka_python.create_topics([KPNewTopic("kp-orders", 3, 1,
                                           topic_configs={"retention.ms": "3600000"})])
    assert "kp-orders" in kafka_python.list_topics()
    (described,) = kafka_python.describe_topics(["kp-orders"])
    assert described["error_code"] == 0
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]

    configs = kafka_python.describe_configs(
        [KPConfigResource(KPConfigResourceType.TOPIC, "kp-orders")], config_filter="all")
    topic_configs = configs["topic"]["kp-orders"]
    assert topic_configs["retention.ms"]["value"] == "3600000"
    assert topic_configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic_configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    kafka_python.alter_configs([KPConfigResource(KPConfigResourceType.TOPIC, "kp-orders",
                                                 configs={"retention.ms": "7200000"})])
    configs = kafka_python.describe_configs(
        [KPConfigResource(KPConfigResourceType.TOPIC, "kp-orders")])
    assert configs["topic"]["kp-orders"]["retention.ms"]["value"] == "7200000"

    kafka_python.create_partitions({"kp-orders": KPNewPartitions(5)})
    (described,) = kafka_python.describe_topics(["kp-orders"])
    assert len(described["partitions"]) == 5

    kafka_python.delete_topics(["kp-orders"])
    assert "kp-orders" not in kafka_python.list_topics()


def test_kafka_python_errors(kafka_python: KafkaAdminClient) -> None:
    kafka_python.create_topics([KPNewTopic("kp-dupe", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        kafka_python.create_topics([KPNewTopic("kp-dupe", 1, 1)])
    with pytest.raises(InvalidTopicError):
        kafka_python.create_topics([KPNewTopic("bad name!", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        kafka_python.create_topics([KPNewTopic("kp-rf", 1, 3)])
    with pytest.raises(InvalidPartitionsError):
        kafka_python.create_partitions({"kp-dupe": KPNewPartitions(1)})


# ------------------------------------------------------------------ confluent-kafka


def test_confluent_topic_lifecycle(confluent: AdminClient, broker: BrokerProcess) -> None:
    futures = confluent.create_topics(
        [NewTopic("ck-defaults"),  # -1 / -1: the broker's defaults (KIP-464)
         NewTopic("ck-compact", 1, 1, config={"cleanup.policy": "compact"})],
        operation_timeout=10)
    for future in futures.values():
        future.result(timeout=CLIENT_TIMEOUT_S)

    metadata = confluent.list_topics(timeout=CLIENT_TIMEOUT_S)
    assert metadata.cluster_id
    assert metadata.controller_id == 1
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [
        (1, "127.0.0.1", broker.port)]
    assert len(metadata.topics["ck-defaults"].partitions) == 2  # num.partitions
    partition = metadata.topics["ck-defaults"].partitions[0]
    assert (partition.leader, partition.replicas, partition.isrs) == (1, [1], [1])

    resource = ConfigResource("topic", "ck-compact")
    described = confluent.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    assert described["cleanup.policy"].value == "compact"
    assert described["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    change = ConfigResource("topic", "ck-compact", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
    ])
    confluent.incremental_alter_configs([change])[change].result(timeout=CLIENT_TIMEOUT_S)
    described = confluent.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    assert described["retention.ms"].value == "60000"
    assert set(described["cleanup.policy"].value.split(",")) == {"compact", "delete"}

    confluent.create_partitions([NewPartitions("ck-compact", 3)])["ck-compact"].result(
        timeout=CLIENT_TIMEOUT_S)
    for future in confluent.delete_topics(["ck-defaults", "ck-compact"],
                                          operation_timeout=10).values():
        future.result(timeout=CLIENT_TIMEOUT_S)
    remaining = confluent.list_topics(timeout=CLIENT_TIMEOUT_S).topics
    assert "ck-defaults" not in remaining and "ck-compact" not in remaining


def test_confluent_broker_configs(confluent: AdminClient) -> None:
    resource = ConfigResource("broker", "1")
    described = confluent.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    assert described["node.id"].value == "1"
    assert described["node.id"].is_read_only
    assert described["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    change = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    confluent.incremental_alter_configs([change])[change].result(timeout=CLIENT_TIMEOUT_S)
    described = confluent.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    assert described["log.retention.ms"].value == "86400000"
    assert described["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    undo = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    confluent.incremental_alter_configs([undo])[undo].result(timeout=CLIENT_TIMEOUT_S)


def test_confluent_describe_cluster(confluent: AdminClient, broker: BrokerProcess) -> None:
    """librdkafka's describe_cluster sends DescribeCluster (flexible v0/v1), not Metadata."""
    cluster = confluent.describe_cluster(request_timeout=CLIENT_TIMEOUT_S).result(
        timeout=CLIENT_TIMEOUT_S)
    assert cluster.cluster_id and cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.port)]


def test_confluent_errors(confluent: AdminClient) -> None:
    futures = confluent.create_topics([NewTopic("ck-bad", 1, 1, config={"retention.ms": "x"})])
    with pytest.raises(KafkaException) as caught:
        futures["ck-bad"].result(timeout=CLIENT_TIMEOUT_S)
    assert caught.value.args[0].code() == ErrorCode.invalid_config
    futures = confluent.delete_topics(["ck-never-created"])
    with pytest.raises(KafkaException) as caught:
        futures["ck-never-created"].result(timeout=CLIENT_TIMEOUT_S)
    assert caught.value.args[0].code() == ErrorCode.unknown_topic_or_partition


# ------------------------------------------------------------------ aiokafka


def test_aiokafka_admin_creates_and_describes(broker: BrokerProcess) -> None:
    async def scenario() -> list[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AIONewTopic("aio-t", 2, 1)])
            return list(await admin.list_topics())
        finally:
            await admin.close()

    assert "aio-t" in asyncio.run(scenario())


# ------------------------------------------------------------------ auto-creation, protocol edges


def metadata_v8(sock: socket.socket, correlation_id: int, topics: list[str],
                allow_auto_topic_creation: bool) -> object:
    header = RequestHeader(ApiKey.METADATA, 8, correlation_id, "raw")
    body = build_request(ApiKey.METADATA, 8, topics=[{"name": t} for t in topics],
                         allow_auto_topic_creation=allow_auto_topic_creation,
                         include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)
    sock.sendall(encode_request(header, body))
    got_id, response = decode_response(read_frame(sock), ApiKey.METADATA, 8)
    assert got_id == correlation_id
    return response


def test_metadata_auto_creates_topics(broker: BrokerProcess) -> None:
    with raw_connection(broker) as sock:
        refused: Any = metadata_v8(sock, 1, ["auto-created"], allow_auto_topic_creation=False)
        assert refused.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        first: Any = metadata_v8(sock, 2, ["auto-created"], allow_auto_topic_creation=True)
        assert first.topics[0].error_code == ErrorCode.leader_not_available  # like Kafka
        second: Any = metadata_v8(sock, 3, ["auto-created"], allow_auto_topic_creation=True)
        assert second.topics[0].error_code == ErrorCode.none
        assert [p.partition_index for p in second.topics[0].partitions] == [0, 1]


def test_api_versions_v99_gets_error_35_with_a_v0_body(broker: BrokerProcess) -> None:
    with raw_connection(broker) as sock:
        header = RequestHeader(ApiKey.API_VERSIONS, 99, 1234, "future")
        payload = encode_request_header(header, 2) + b"\x00\x00\x00"
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        frame = read_frame(sock)
        correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
        assert (correlation_id, error_code) == (1234, 35)
        entries = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
        assert len(frame) == 10 + 6 * count
        assert (ApiKey.API_VERSIONS, 0, 4) in entries
        assert (ApiKey.METADATA, 0, 13) in entries
        # Same connection, a served version now.
        assert ApiKey.CREATE_TOPICS in api_versions_v3(sock, 1235)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff\xff",  # negative size
        struct.pack(">i", 200 * 1024 * 1024),  # over socket.request.max.bytes
        struct.pack(">i", 3) + b"abc",  # too short for a header
        struct.pack(">i", 12) + struct.pack(">hhih", 3, 8, 1, -1) + b"\xff\xff",  # bad body
        struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 1, -1),  # unserved version
    ],
)
def test_garbage_closes_only_its_connection(broker: BrokerProcess, garbage: bytes) -> None:
    with raw_connection(broker) as bystander, raw_connection(broker) as offender:
        api_versions_v3(bystander, 1)
        offender.sendall(garbage)
        assert closed_by_broker(offender)
        assert api_versions_v3(bystander, 2)
    with raw_connection(broker) as newcomer:
        assert api_versions_v3(newcomer, 3)


def test_health_endpoints(broker: BrokerProcess) -> None:
    for path, expected in (("/healthz", 200), ("/readyz", 200), ("/nope", 404)):
        url = f"http://127.0.0.1:{broker.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT_S) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == expected, path


# ------------------------------------------------------------------ restart and shutdown


def test_sigterm_is_clean_and_topics_survive_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("durable", 3, 1, config={"retention.ms": "123456"})])[
            "durable"].result(timeout=CLIENT_TIMEOUT_S)
        first = admin.list_topics(timeout=CLIENT_TIMEOUT_S).cluster_id
        assert broker.stop() == 0
        assert (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists()

        broker.start()
        assert not (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists()  # deleted while running
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
        assert metadata.cluster_id == first
        assert len(metadata.topics["durable"].partitions) == 3
        resource = ConfigResource("topic", "durable")
        described = admin.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
        assert described["retention.ms"].value == "123456"
        assert broker.stop() == 0
        assert (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists()
    finally:
        if broker.is_running():
            broker.kill()


def test_strata_broker_command_with_free_ports(tmp_path: Path) -> None:
    """``strata broker`` with port 0 for Kafka and HTTP: the bound ports are printed, served,
    and SIGTERM still exits 0."""
    import os
    import queue
    import re
    import signal
    import subprocess
    import threading
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env["STRATA_NUM_PARTITIONS"] = "4"  # the environment layer
    process = subprocess.Popen(
        [str(STRATA), "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "http.port=0", "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", "no.such.setting=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        text=True, start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        seen: list[str] = []
        match = None
        while match is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            seen.append(line)
            match = re.search(r"serving Kafka on 127\.0\.0\.1:(\d+) .*HTTP on [\d.]+:(\d+)", line)
        kafka_port, http_port = int(match.group(1)), int(match.group(2))
        assert kafka_port != 0 and http_port != 0
        assert any("no.such.setting" in line for line in seen)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=10) as r:
            assert r.status == 200
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka_port}"})
        admin.create_topics([NewTopic("env-default")])["env-default"].result(
            timeout=CLIENT_TIMEOUT_S)
        metadata = admin.list_topics(timeout=CLIENT_TIMEOUT_S)
        assert len(metadata.topics["env-default"].partitions) == 4
        assert [b.port for b in metadata.brokers.values()] == [kafka_port]
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        reader.join(timeout=10)  # EOF once the broker is gone
        assert process.stdout is not None
        process.stdout.close()
