"""``strata topic ...`` against a real broker: outputs, exit codes (0 ok, 1 Kafka error, 2 bad
usage) and the one-line errors scripts rely on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..broker_process import free_port
from .conftest import Result, StrataCli, run_strata

pytestmark = pytest.mark.integration


def json_lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.ok().stdout.splitlines()]


def describe(strata_cli: StrataCli, topic: str, *extra: str) -> dict[str, Any]:
    [document] = json_lines(strata_cli("topic", "describe", topic, "--format", "json", *extra))
    assert isinstance(document, dict)
    return document


def assert_one_error_line(result: Result, code: int, prefix: str) -> str:
    assert result.returncode == code, str(result)
    assert result.stdout == ""
    assert len(result.error_lines) == 1, str(result)
    assert "Traceback" not in result.stderr
    line = result.error_lines[0]
    assert line.startswith(prefix), line
    return line


def test_create_list_describe_alter_delete(strata_cli: StrataCli) -> None:
    created = strata_cli("topic", "create", "orders", "--partitions", "3",
                         "--replication-factor", "1", "--config", "retention.ms=60000").ok()
    assert created.stdout == "created topic orders\n"

    listed = json_lines(strata_cli("topic", "list", "--format", "json"))
    assert {"name": "orders", "partitions": 3, "replication_factor": 1} in listed
    table = strata_cli("topic", "list").ok().stdout.splitlines()
    assert table[0].split() == ["NAME", "PARTITIONS", "REPLICATION_FACTOR"]
    assert ["orders", "3", "1"] in [row.split() for row in table[1:]]

    described = describe(strata_cli, "orders")
    assert described["name"] == "orders"
    assert described["partitions"] == [
        {"partition": p, "leader": 1, "replicas": [1], "isr": [1],
         "log_start_offset": 0, "high_watermark": 0}
        for p in range(3)
    ]
    assert described["configs"] == {"retention.ms": "60000"}  # only what differs from defaults
    text = strata_cli("topic", "describe", "orders").ok().stdout
    assert "retention.ms=60000  (DYNAMIC_TOPIC_CONFIG)" in text
    assert "PARTITION  LEADER  REPLICAS  ISR  LOG_START_OFFSET  HIGH_WATERMARK" in text

    altered = strata_cli("topic", "alter", "orders", "--set", "retention.ms=120000",
                         "--set", "cleanup.policy=compact", "--partitions", "5").ok()
    assert altered.stdout.startswith("altered topic orders: ")
    described = describe(strata_cli, "orders")
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3, 4]
    assert described["configs"] == {"retention.ms": "120000", "cleanup.policy": "compact"}

    strata_cli("topic", "alter", "orders", "--delete", "cleanup.policy").ok()
    assert describe(strata_cli, "orders")["configs"] == {"retention.ms": "120000"}
    every = describe(strata_cli, "orders", "--all-configs")["configs"]
    assert every["cleanup.policy"] == "delete"
    assert every["retention.ms"] == "120000"

    deleted = strata_cli("topic", "delete", "orders").ok()
    assert deleted.stdout == "deleted topic orders\n"
    assert "orders" not in [t["name"] for t in json_lines(strata_cli("topic", "list",
                                                                     "--format", "json"))]
    line = assert_one_error_line(strata_cli("topic", "describe", "orders"), 1,
                                 "strata topic describe: ")
    assert line == ("strata topic describe: UNKNOWN_TOPIC_OR_PARTITION: "
                    "topic 'orders' does not exist")


def test_create_takes_broker_defaults(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "defaults").ok()
    described = describe(strata_cli, "defaults")
    assert len(described["partitions"]) == 3  # num.partitions of the test broker
    assert all(p["replicas"] == [1] for p in described["partitions"])


def test_topic_already_exists_is_exit_1_and_one_line(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "twice", "-p", "1").ok()
    line = assert_one_error_line(strata_cli("topic", "create", "twice", "-p", "1"), 1,
                                 "strata topic create: ")
    assert line == "strata topic create: TOPIC_ALREADY_EXISTS: topic 'twice' already exists"
    assert strata_cli("topic", "create", "twice", "--if-not-exists").ok().stdout == ""


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["topic", "alter", "shrink", "--partitions", "1"], "INVALID_PARTITIONS: "),
        (["topic", "alter", "shrink", "--set", "no.such.config=1"], "INVALID_CONFIG: "),
        (["topic", "create", "bad!name"], "INVALID_TOPIC_EXCEPTION: "),
        (["topic", "create", "cfg", "--config", "retention.ms=soon"], "INVALID_CONFIG: "),
        (["topic", "delete", "never-was"], "UNKNOWN_TOPIC_OR_PARTITION: topic 'never-was'"),
        (["topic", "alter", "never-was", "--set", "retention.ms=1"],
         "UNKNOWN_TOPIC_OR_PARTITION: topic 'never-was'"),
    ],
)
def test_broker_errors_are_exit_1_and_one_line(
    strata_cli: StrataCli, args: list[str], problem: str
) -> None:
    strata_cli("topic", "create", "shrink", "-p", "2", "--if-not-exists").ok()
    command = "strata " + " ".join(args[:2]) + ": "
    line = assert_one_error_line(strata_cli(*args), 1, command)
    assert line.removeprefix(command).startswith(problem), line


def test_if_exists_and_if_not_exists(strata_cli: StrataCli) -> None:
    assert strata_cli("topic", "delete", "absent", "--if-exists").ok().stdout == ""
    strata_cli("topic", "create", "present", "-p", "1", "--if-not-exists").ok()
    strata_cli("topic", "create", "present", "-p", "1", "--if-not-exists").ok()
    assert strata_cli("topic", "delete", "present", "--if-exists").ok().stdout == (
        "deleted topic present\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["topic", "create"],  # missing argument
        ["topic", "create", "x", "--partitions", "many"],
        ["topic", "create", "x", "--partitions", "0"],
        ["topic", "create", "x", "--config", "retention.ms"],
        ["topic", "create", "x", "--no-such-option"],
        ["topic", "alter", "x"],  # nothing to change
        ["topic", "alter", "x", "--set", "a=1", "--delete", "a"],
        ["topic", "list", "--format", "yaml"],
        ["topic", "frobnicate"],
        ["produce", "x", "--acks", "2"],
        ["produce", "x", "--header", "novalue"],
        ["produce", "x", "--rate", "0"],
        ["consume", "x", "--from", "yesterday"],
        ["consume", "x", "--count", "0"],
        ["consume", "x", "--template", "%z"],
        ["consume", "x", "--timeout", "0.1"],
    ],
)
def test_bad_usage_is_exit_2_and_one_line(args: list[str]) -> None:
    # Nothing listens on the bootstrap address: bad usage must be caught before any request.
    result = run_strata(*args, env={"STRATA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"})
    assert_one_error_line(result, 2, "strata ")


@pytest.mark.parametrize(
    "args",
    [
        ["topic", "list"],
        ["topic", "create", "t"],
        ["topic", "describe", "t"],
        ["produce", "t"],
        ["consume", "t", "--exit-at-end"],
    ],
)
def test_broker_unreachable_is_exit_1_within_the_timeout(args: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    result = run_strata(*args, "--bootstrap-server", address, "--timeout", "1", timeout=30)
    line = assert_one_error_line(result, 1, f"strata {args[0]}")
    assert f"cannot reach a broker at {address} within 1s" in line
    assert result.elapsed_s < 10
