"""``strata groups ...`` against a real broker: list, describe with lag, reset plans and their
execution, refusals while a group has members, delete, and the usage errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..broker_process import BrokerProcess
from .conftest import Result, StrataCli

pytestmark = pytest.mark.integration

TOPIC = "gr-orders"
GROUP = "gr-app"
ENDS = {0: 6, 1: 4}  # records produced per partition
WAIT_S = 30.0


def json_lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.ok().stdout.splitlines()]


def committed(strata_cli: StrataCli, group: str = GROUP) -> dict[int, int | None]:
    [doc] = json_lines(strata_cli("groups", "describe", group, "--format", "json"))
    return {p["partition"]: p["committed_offset"] for p in doc["partitions"]}


def reset(strata_cli: StrataCli, *args: str) -> Result:
    return strata_cli("groups", "reset-offsets", GROUP, *args)


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    """``gr-orders``: 6 records in partition 0, 4 in partition 1; group ``gr-app`` committed
    4 and 1 (a simple commit, no membership)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(WAIT_S)
    for partition, count in ENDS.items():
        for i in range(count):
            producer.produce(TOPIC, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 1)],
                        asynchronous=False)
    finally:
        consumer.close()
    return TOPIC


def test_list_and_describe_with_lag(strata_cli: StrataCli, topic: str) -> None:
    listed = json_lines(strata_cli("groups", "list", "--format", "json"))
    assert {"group": GROUP, "state": "EMPTY", "type": "simple"} in listed
    [doc] = json_lines(strata_cli("groups", "describe", GROUP, "--format", "json"))
    assert doc["state"] == "EMPTY" and doc["members"] == [] and doc["coordinator"] == 1
    assert doc["partitions"] == [
        {"topic": topic, "partition": 0, "committed_offset": 4, "log_end_offset": 6, "lag": 2,
         "member_id": None},
        {"topic": topic, "partition": 1, "committed_offset": 1, "log_end_offset": 4, "lag": 3,
         "member_id": None},
    ]
    text = strata_cli("groups", "describe", GROUP).ok().stdout.splitlines()
    assert text[0].startswith(f"Group {GROUP}: state EMPTY")
    assert text[1].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                               "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert text[2].split() == [topic, "0", "4", "6", "2", "-", "-", "-"]


def test_reset_plans_and_executes(strata_cli: StrataCli, topic: str) -> None:
    dry = reset(strata_cli, "--topic", topic, "--to-earliest").ok()
    assert [line.split() for line in dry.stdout.splitlines()] == [
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"], [topic, "0", "4", "0"],
        [topic, "1", "1", "0"]]
    assert "dry run" in dry.stderr
    assert committed(strata_cli) == {0: 4, 1: 1}  # nothing changed

    reset(strata_cli, "--topic", topic, "--to-latest", "--execute").ok()
    assert committed(strata_cli) == {0: 6, 1: 4}
    reset(strata_cli, "--topic", f"{topic}:1", "--to-offset", "99", "--execute").ok()
    assert committed(strata_cli) == {0: 6, 1: 4}  # clamped to the log end
    reset(strata_cli, "--all-topics", "--shift-by", "-2", "--execute").ok()
    assert committed(strata_cli) == {0: 4, 1: 2}
    reset(strata_cli, "--all-topics", "--to-datetime", "2020-01-01T00:00:00Z", "--execute").ok()
    assert committed(strata_cli) == {0: 0, 1: 0}  # every record is later than that
    future = "2999-01-01T00:00:00"
    plan = json_lines(reset(strata_cli, "--all-topics", "--to-datetime", future, "--format",
                            "json"))
    assert [(p["partition"], p["new_offset"]) for p in plan] == [(0, 6), (1, 4)]


@pytest.fixture
def active_member(broker: BrokerProcess, strata_cli: StrataCli, topic: str) -> Iterator[None]:
    """A consumer subscribed in ``gr-app``, polling on a thread until the test ends."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.1)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while True:
        [doc] = json_lines(strata_cli("groups", "describe", GROUP, "--format", "json"))
        if doc["members"]:
            break
        assert time.monotonic() < deadline, "the consumer never showed up in the group"
    try:
        yield
    finally:
        stop.set()
        thread.join(WAIT_S)
        consumer.close()  # LeaveGroup: the group is empty again


def test_reset_and_delete_are_refused_while_members_are_active(
    strata_cli: StrataCli, active_member: None
) -> None:
    refused = reset(strata_cli, "--all-topics", "--to-earliest", "--execute")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.error_lines[-1].startswith(
        f"strata groups reset-offsets: cannot reset offsets of group '{GROUP}': it has 1 active "
        "members (state "), refused.stderr
    deleted = strata_cli("groups", "delete", GROUP)
    assert deleted.returncode == 1 and "NON_EMPTY_GROUP" in deleted.stderr, str(deleted)


def test_delete_and_unknown_groups(strata_cli: StrataCli, topic: str) -> None:
    assert strata_cli("groups", "delete", GROUP).ok().stdout == f"deleted group {GROUP}\n"
    missing = strata_cli("groups", "describe", GROUP)
    assert missing.returncode == 1
    assert missing.error_lines == [
        f"strata groups describe: GROUP_ID_NOT_FOUND: consumer group '{GROUP}' does not exist"]
    again = strata_cli("groups", "delete", GROUP)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stderr, str(again)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--all-topics", "--to-earliest", "--to-latest"), "give exactly one of"),
        (("--all-topics",), "give exactly one of"),
        (("--to-earliest",), "give --topic (repeatable) or --all-topics"),
        (("--all-topics", "--to-datetime", "yesterday"), "is not a date-time"),
        (("--topic", "t:x", "--to-earliest"), "partitions must be numbers"),
    ],
)
def test_usage_errors(strata_cli: StrataCli, args: tuple[str, ...], message: str) -> None:
    result = reset(strata_cli, *args)
    assert result.returncode == 2, str(result)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_group_configs_are_shown_set_and_refused(strata_cli: StrataCli, topic: str) -> None:
    """``strata groups configs``: KIP-848 group configs with their source; a value outside the
    broker's bounds is the broker's INVALID_CONFIG line (exit 1); usage errors exit 2."""
    [shown] = json_lines(strata_cli("groups", "configs", "cfg-app", "--format", "json"))
    assert shown["configs"]["consumer.heartbeat.interval.ms"] == {
        "value": "5000", "source": "DEFAULT_CONFIG"}
    [changed] = json_lines(strata_cli("groups", "configs", "cfg-app", "--set",
                                      "consumer.heartbeat.interval.ms=6000", "--format", "json"))
    assert changed["configs"]["consumer.heartbeat.interval.ms"] == {
        "value": "6000", "source": "GROUP_CONFIG"}
    table = strata_cli("groups", "configs", "cfg-app", "-d",
                       "consumer.heartbeat.interval.ms").ok().stdout
    assert "consumer.heartbeat.interval.ms" in table and "DEFAULT_CONFIG" in table
    assert "GROUP_CONFIG" not in table
    refused = strata_cli("groups", "configs", "cfg-app", "-s", "consumer.session.timeout.ms=1")
    assert refused.returncode == 1, str(refused)
    assert refused.error_lines == [
        "strata groups configs: INVALID_CONFIG: consumer.session.timeout.ms must be greater "
        "than or equal to group.consumer.min.session.timeout.ms"], str(refused)
    usage = strata_cli("groups", "configs", "cfg-app", "-s", "nokey")
    assert usage.returncode == 2 and "expected KEY=VALUE" in usage.stderr, str(usage)
