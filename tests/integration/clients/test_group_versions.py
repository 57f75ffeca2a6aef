"""The group and offset APIs at the newest versions each real client and the broker share.

Each test runs one client library through a consumer group's life — FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup — and its admin client
through ListGroups, DescribeGroups, OffsetFetch and DeleteGroups, against a broker behind a
``RequestTap`` (every connection of the client goes through it). The versions are read off the
wire per API and must be the newest both sides support: min(the client's newest, the broker's
newest served). A broker that advertised less, or answered a newer version wrongly (the client
would fail or retry at another version), fails the test.

The client's newest version per API:

* librdkafka 2.16 (confluent-kafka 2.16.1): the upper bounds of its
  ``rd_kafka_broker_ApiVersion_supported`` calls, written below;
* kafka-python 3.0: its message schema's newest version, capped where its coordinator caps it
  (``max_version=`` in ``kafka/coordinator``);
* aiokafka 0.14: the newest of the version structs its request class can build;
* kafkajs 2.2: the newest of its request definitions (``kafkajs_group_life.js`` reports them).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import typing
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest

from strata.broker.handlers import served_versions
from strata.protocol import ApiKey

from ..broker_process import BrokerProcess, running_broker
from ..clients.drivers.kafkajs_driver import JS_DIR
from ..groups.conftest import GROUP_SETTINGS
from ..groups.kafka_ops import create_topic, produce
from ..groups.request_tap import RequestTap

pytestmark = pytest.mark.integration

DEADLINE_S: Final = 60.0
PARTITIONS: Final = 2
RECORDS: Final = 10
SERVED: Final = served_versions()
CONSUMER_APIS: Final = (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                        ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH,
                        ApiKey.LEAVE_GROUP)
ADMIN_APIS: Final = (ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS)

LIBRDKAFKA_NEWEST: Final = {
    ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 5, ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3, ApiKey.LEAVE_GROUP: 1, ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9, ApiKey.LIST_GROUPS: 5, ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.DELETE_GROUPS: 2,
}
KAFKA_PYTHON_CAPS: Final = {ApiKey.JOIN_GROUP: 7, ApiKey.SYNC_GROUP: 5,
                            ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 8}


@pytest.fixture(scope="module")
def tap_and_broker(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[RequestTap, BrokerProcess]]:
    """One broker behind one tap for the module: each test's client has its own client id, so
    the versions it sent are told apart on the shared tap."""
    tap = RequestTap()
    try:
        with running_broker(tmp_path_factory.mktemp("versions"), {
                **GROUP_SETTINGS, "advertised.listeners": tap.advertised_listener}) as broker:
            tap.start(broker.port)
            yield tap, broker
    finally:
        tap.close()


@pytest.fixture
def tapped(tap_and_broker: tuple[RequestTap, BrokerProcess]) -> tuple[RequestTap, str, str]:
    """(tap, a fresh topic holding ``RECORDS`` records, a fresh group id)."""
    tap, broker = tap_and_broker
    tag = uuid.uuid4().hex[:8]
    topic = f"versions-{tag}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, PARTITIONS, RECORDS)
    return tap, topic, f"versions-group-{tag}"


def expected(newest: Mapping[ApiKey, int]) -> dict[ApiKey, int]:
    return {api: min(client, SERVED[api].max_version) for api, client in newest.items()}


def negotiated(tap: RequestTap, client_id: str, apis: tuple[ApiKey, ...]) -> dict[ApiKey, int]:
    """The one version ``client_id`` sent of each API (printed, for the test log)."""
    seen = tap.versions(client_id)
    result = {}
    for api in apis:
        versions = seen.get(api, set())
        assert len(versions) == 1, f"{client_id} sent {api.name} at versions {versions}"
        result[api] = versions.pop()
    print(f"{client_id}: " + ", ".join(f"{a.name} v{v}" for a, v in result.items()))
    return result


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ------------------------------------------------------------------------- confluent-kafka
def test_confluent_kafka(tapped: tuple[RequestTap, str, str]) -> None:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    tap, topic, group = tapped
    client_id = "versions-confluent"
    consumer = Consumer({"bootstrap.servers": tap.bootstrap, "client.id": client_id,
                         "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "heartbeat.interval.ms": 100,
                         "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + DEADLINE_S
    while consumed < RECORDS or ApiKey.HEARTBEAT not in tap.versions(client_id):
        assert time.monotonic() < deadline, f"consumed {consumed} of {RECORDS}"
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            consumed += 1
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                   timeout=DEADLINE_S)
    assert sum(tp.offset for tp in committed) == RECORDS
    consumer.close()

    admin = AdminClient({"bootstrap.servers": tap.bootstrap, "client.id": client_id})
    listed = admin.list_consumer_groups().result(DEADLINE_S)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
    assert described.group_id == group and not described.members
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(DEADLINE_S)
    assert sum(tp.offset for tp in offsets.topic_partitions) == RECORDS
    admin.delete_consumer_groups([group])[group].result(DEADLINE_S)
    del admin  # its threads stop now, while the tap still relays

    versions = negotiated(tap, client_id, (*CONSUMER_APIS, *ADMIN_APIS))
    assert versions == expected(LIBRDKAFKA_NEWEST)


# --------------------------------------------------------------------------- kafka-python
def kafka_python_newest() -> dict[ApiKey, int]:
    from kafka.protocol.admin.groups import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
    )
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        SyncGroupRequest,
    )
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

    classes: dict[ApiKey, Any] = {
        ApiKey.FIND_COORDINATOR: FindCoordinatorRequest, ApiKey.JOIN_GROUP: JoinGroupRequest,
        ApiKey.SYNC_GROUP: SyncGroupRequest, ApiKey.HEARTBEAT: HeartbeatRequest,
        ApiKey.LEAVE_GROUP: LeaveGroupRequest, ApiKey.OFFSET_COMMIT: OffsetCommitRequest,
        ApiKey.OFFSET_FETCH: OffsetFetchRequest, ApiKey.LIST_GROUPS: ListGroupsRequest,
        ApiKey.DESCRIBE_GROUPS: DescribeGroupsRequest,
        ApiKey.DELETE_GROUPS: DeleteGroupsRequest,
    }
    return {api: min(cls._valid_versions[1], KAFKA_PYTHON_CAPS.get(api, 2**15))
            for api, cls in classes.items()}


def test_kafka_python(tapped: tuple[RequestTap, str, str]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    tap, topic, group = tapped
    client_id = "versions-kafka-python"
    consumer = KafkaConsumer(bootstrap_servers=tap.bootstrap, client_id=client_id,
                             group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, heartbeat_interval_ms=100,
                             session_timeout_ms=6000)
    consumer.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + DEADLINE_S
    while consumed < RECORDS or ApiKey.HEARTBEAT not in tap.versions(client_id):
        assert time.monotonic() < deadline, f"consumed {consumed} of {RECORDS}"
        consumed += sum(len(batch) for batch in consumer.poll(timeout_ms=100).values())
    consumer.commit()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    assert sum(consumer.committed(tp) or 0 for tp in partitions) == RECORDS
    consumer.close()

    admin = KafkaAdminClient(bootstrap_servers=tap.bootstrap, client_id=client_id)
    try:
        listed = admin.list_groups()
        assert group in {str(g["group_id"]) if isinstance(g, dict) else str(g[0])
                         for g in listed}
        (described,) = admin.describe_groups([group])
        assert group in str(described)
        # Two groups in one OffsetFetch (v8+, KIP-709): ours and one that never committed.
        offsets = admin.list_group_offsets({group: None, f"{group}-none": None})
        assert sum(o.offset for o in offsets[group].values()) == RECORDS
        assert offsets[f"{group}-none"] == {}
        admin.delete_groups([group])
    finally:
        admin.close()

    versions = negotiated(tap, client_id, (*CONSUMER_APIS, *ADMIN_APIS))
    assert versions == expected(kafka_python_newest())


# -------------------------------------------------------------------------------- aiokafka
def aiokafka_newest() -> dict[ApiKey, int]:
    from aiokafka.protocol import admin, commit, coordination, group

    def newest(request: Any) -> int:
        (struct_union,) = typing.get_args(request.__orig_bases__[0])
        return max(s.API_VERSION for s in typing.get_args(struct_union))

    return {ApiKey.FIND_COORDINATOR: newest(coordination.FindCoordinatorRequest),
            ApiKey.JOIN_GROUP: newest(group.JoinGroupRequest),
            ApiKey.SYNC_GROUP: newest(group.SyncGroupRequest),
            ApiKey.HEARTBEAT: newest(group.HeartbeatRequest),
            ApiKey.LEAVE_GROUP: newest(group.LeaveGroupRequest),
            ApiKey.OFFSET_COMMIT: newest(commit.OffsetCommitRequest),
            ApiKey.OFFSET_FETCH: newest(commit.OffsetFetchRequest),
            ApiKey.LIST_GROUPS: newest(admin.ListGroupsRequest),
            ApiKey.DESCRIBE_GROUPS: newest(admin.DescribeGroupsRequest)}


async def test_aiokafka(tapped: tuple[RequestTap, str, str]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    tap, topic, group = tapped
    client_id = "versions-aiokafka"
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=tap.bootstrap, client_id=client_id,
                                group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, heartbeat_interval_ms=100,
                                session_timeout_ms=6000)
    await consumer.start()
    try:
        consumed = 0
        deadline = time.monotonic() + DEADLINE_S
        while consumed < RECORDS or ApiKey.HEARTBEAT not in tap.versions(client_id):
            assert time.monotonic() < deadline, f"consumed {consumed} of {RECORDS}"
            batches = await consumer.getmany(timeout_ms=100)
            consumed += sum(len(batch) for batch in batches.values())
        await consumer.commit()
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert sum([await consumer.committed(tp) or 0 for tp in partitions]) == RECORDS
    finally:
        await asyncio.wait_for(consumer.stop(), DEADLINE_S)

    admin = AIOKafkaAdminClient(bootstrap_servers=tap.bootstrap, client_id=client_id)
    await admin.start()
    try:
        listed = await admin.list_consumer_groups()
        assert group in {g[0] for g in listed}
        described = await admin.describe_consumer_groups([group])
        assert described
        offsets = await admin.list_consumer_group_offsets(group)
        assert sum(o.offset for o in offsets.values()) == RECORDS
    finally:
        await admin.close()

    # aiokafka's admin client has no DeleteGroups.
    versions = negotiated(tap, client_id,
                          (*CONSUMER_APIS, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS))
    assert versions == expected(aiokafka_newest())


# -------------------------------------------------------------------------------- kafkajs
KAFKAJS_SCRIPT: Final = Path(__file__).parent.parent / "groups" / "kafkajs_group_life.js"
KAFKAJS_NAMES: Final = {
    "GroupCoordinator": ApiKey.FIND_COORDINATOR, "JoinGroup": ApiKey.JOIN_GROUP,
    "SyncGroup": ApiKey.SYNC_GROUP, "Heartbeat": ApiKey.HEARTBEAT,
    "LeaveGroup": ApiKey.LEAVE_GROUP, "OffsetCommit": ApiKey.OFFSET_COMMIT,
    "OffsetFetch": ApiKey.OFFSET_FETCH, "ListGroups": ApiKey.LIST_GROUPS,
    "DescribeGroups": ApiKey.DESCRIBE_GROUPS, "DeleteGroups": ApiKey.DELETE_GROUPS,
}


def test_kafkajs(tapped: tuple[RequestTap, str, str]) -> None:
    assert shutil.which("node"), "node is not on PATH: kafkajs tests need Node.js"
    modules = JS_DIR / "node_modules"
    assert (modules / "kafkajs").is_dir(), f"run `make node-deps` (npm ci in {JS_DIR})"
    tap, topic, group = tapped
    client_id = "versions-kafkajs"
    done = subprocess.run(
        ["node", str(KAFKAJS_SCRIPT)], capture_output=True, timeout=DEADLINE_S * 2,
        env={**os.environ, "NODE_PATH": str(modules)},
        input=json.dumps({"brokers": [tap.bootstrap], "clientId": client_id, "topic": topic,
                          "group": group, "records": RECORDS}).encode(), check=False)
    lines = done.stdout.decode().strip().splitlines()
    assert lines, f"kafkajs exited {done.returncode} without an answer: {done.stderr.decode()}"
    answer = json.loads(lines[-1])
    assert answer["ok"], answer["error"]
    assert answer["committed"] == RECORDS
    newest = {KAFKAJS_NAMES[name]: version for name, version in answer["newest"].items()}
    versions = negotiated(tap, client_id, (*CONSUMER_APIS, *ADMIN_APIS))
    assert versions == expected(newest)
