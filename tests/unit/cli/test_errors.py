"""Exit codes and one-line errors: usage errors (no broker needed) and Kafka error lines."""

from __future__ import annotations

import pytest
import typer
from confluent_kafka import KafkaError
from typer.testing import CliRunner

from strata.cli.errors import kafka_line
from strata.cli.kafka_client import kafka_error
from strata.cli.main import app
from strata.cli.topic import parse_pairs
from strata.client.kafka_errors import KafkaClientError


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["topic", "create"], "strata topic create: Missing argument 'topics'."),
        (["topic", "create", "x", "-p", "zero"],
         "strata topic create: Invalid value for '--partitions' / '-p': Input should be a valid "
         "integer, unable to parse string as an integer"),
        (["topic", "nope"], "strata topic: No such command 'nope'."),
        (["consume", "t", "--from", "soon"],
         "strata consume: Invalid value for --from: 'soon': expected earliest, latest, an "
         "offset, -N or @<timestamp-ms>"),
        (["topic", "alter", "t"],
         "strata topic alter: nothing to change: give --set, --delete or --partitions"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], line: str) -> None:
    result = CliRunner().invoke(app, args, prog_name="strata")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


def test_no_arguments_prints_help() -> None:
    result = CliRunner().invoke(app, [], prog_name="strata")
    assert result.exit_code == 2
    assert "topic" in result.output and "produce" in result.output


def test_kafka_error_lines_use_kafka_names() -> None:
    exists = kafka_error(KafkaError(36, "Topic 'x' already exists."), "topic 'x'")
    assert exists.message == "TOPIC_ALREADY_EXISTS: topic 'x' already exists"
    assert exists.exit_code == 1
    # librdkafka's generic text names nothing: the subject is added.
    generic = kafka_error(KafkaError(3), "topic 'x'")
    assert generic.message == "UNKNOWN_TOPIC_OR_PARTITION: topic 'x': unknown topic or partition"
    # librdkafka abbreviates some names (TOPIC_EXCEPTION); Kafka's full name is used.
    assert kafka_error(KafkaError(17, "bad")).message == "INVALID_TOPIC_EXCEPTION: bad"
    assert kafka_error(KafkaError(KafkaError._MSG_TIMED_OUT)).message.startswith(
        "_MSG_TIMED_OUT: "
    )


def test_parse_pairs() -> None:
    assert parse_pairs(["a=1", "b=x=y", "c="], "--config") == {"a": "1", "b": "x=y", "c": ""}
    for bad in (["a"], ["=1"], ["a=1", "a=2"]):
        with pytest.raises(typer.BadParameter):
            parse_pairs(bad, "--config")


def test_kafka_line_for_an_unreachable_cluster_and_a_wait_that_ran_out() -> None:
    nobody = KafkaClientError.of(KafkaError(KafkaError._TIMED_OUT), "the cluster at h:1",
                                 "Metadata")
    nobody.unreachable, nobody.bootstrap, nobody.timeout_s = True, "h:1", 2.0
    nobody.reason = "Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    assert kafka_line(nobody).message == (
        "cannot reach a broker at h:1 within 2s: Connect to ipv4#127.0.0.1:1 failed: "
        "Connection refused")
    nobody.reason = None  # librdkafka reported nothing: its own text of the failure
    assert kafka_line(nobody).message == "cannot reach a broker at h:1 within 2s: Local: Timed out"
    late = KafkaClientError("_TIMED_OUT", "no answer about the cluster within 2s",
                            subject="the cluster", timed_out=True)
    assert kafka_line(late).message == "no answer about the cluster within 2s"
    assert kafka_line(late).exit_code == 1
