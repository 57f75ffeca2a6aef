"""``KafkaAdmin`` and ``KafkaClientError``: the one admin-client wrapper of the CLI, the admin
service and the operator, and the one failure type it raises.

No broker is needed: an unreachable address (a closed port on 127.0.0.1) exercises the
"no broker answered" path for real; futures and metadata are otherwise stand-ins.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from strata.client import kafka_admin
from strata.client.kafka_admin import (
    ConnectionErrors,
    KafkaAdmin,
    check_partitions,
    cluster_metadata,
    offset_spec,
    topic_of,
)
from strata.client.kafka_errors import KafkaClientError


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 nothing listens on (bound, never listening, so no one takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


# ------------------------------------------------------------------------ KafkaClientError
def test_a_broker_error_is_named_as_kafka_names_it_with_its_generic_prefix_stripped() -> None:
    error = KafkaClientError.of(KafkaError(3), "topic 'x'", "DeleteTopics")
    assert error.name == "UNKNOWN_TOPIC_OR_PARTITION"  # librdkafka: UNKNOWN_TOPIC_OR_PART
    assert error.generic and error.message == "Unknown topic or partition"
    assert error.text == "Broker: Unknown topic or partition"
    assert (error.subject, error.api) == ("topic 'x'", "DeleteTopics")
    assert not (error.unreachable or error.timed_out)


def test_a_broker_message_is_kept_and_not_generic() -> None:
    error = KafkaClientError.of(KafkaException(KafkaError(36, "Topic 'x' already exists.")),
                                "topic 'x'")
    assert (error.name, error.message, error.generic) == (
        "TOPIC_ALREADY_EXISTS", "Topic 'x' already exists.", False)
    # librdkafka abbreviates TOPIC_EXCEPTION; Kafka's full name is used.
    assert KafkaClientError.of(KafkaError(17, "bad"), "t").name == "INVALID_TOPIC_EXCEPTION"


def test_a_local_error_keeps_librdkafkas_name_and_an_exception_without_one_its_text() -> None:
    local = KafkaClientError.of(KafkaError(KafkaError._MSG_TIMED_OUT), "record 0")
    assert local.name == "_MSG_TIMED_OUT" and local.generic
    bare = KafkaClientError.of(KafkaException("something odd"), "topic 'x'")
    assert (bare.name, bare.message, bare.text) == ("", "something odd", "something odd")


def test_unknown_topic_names_the_topic_in_its_message() -> None:
    error = KafkaClientError.unknown_topic("orders")
    assert (error.name, error.message, error.subject) == (
        "UNKNOWN_TOPIC_OR_PARTITION", "topic 'orders' does not exist", "")


# ------------------------------------------------------------------------ ConnectionErrors
def test_connection_errors_keep_the_last_reason_but_not_all_brokers_down() -> None:
    errors = ConnectionErrors()
    assert errors.reason is None
    errors(KafkaError(KafkaError._TRANSPORT, "Connect to 127.0.0.1:1 failed: refused"))
    errors(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert errors.all_brokers_down
    assert errors.reason == "Connect to 127.0.0.1:1 failed: refused"
    errors.reset()
    assert not errors.all_brokers_down


# ------------------------------------------------------------------------ metadata
class _FailingClient:
    """A client whose Metadata request fails with ``error``; ``poll`` serves ``reported``."""

    def __init__(self, error: KafkaError, errors: ConnectionErrors,
                 reported: KafkaError | None = None) -> None:
        self.error, self.errors, self.reported = error, errors, reported

    def list_topics(self, timeout: float) -> Any:
        raise KafkaException(self.error)

    def poll(self, timeout: float) -> None:
        if self.reported is not None:
            self.errors(self.reported)


def test_metadata_nobody_answered_is_unreachable_with_the_last_reason() -> None:
    errors = ConnectionErrors()
    refused = KafkaError(KafkaError._TRANSPORT, "Connect failed: Connection refused")
    client = _FailingClient(KafkaError(KafkaError._TIMED_OUT), errors, reported=refused)
    with pytest.raises(KafkaClientError) as raised:
        cluster_metadata(client, "127.0.0.1:1", 3.0, errors)
    error = raised.value
    assert error.unreachable and error.api == "Metadata" and error.name == "_TIMED_OUT"
    assert error.reason == "Connect failed: Connection refused"
    assert (error.bootstrap, error.timeout_s) == ("127.0.0.1:1", 3.0)
    assert error.subject == "the cluster at 127.0.0.1:1"


def test_metadata_a_broker_refused_is_not_unreachable() -> None:
    errors = ConnectionErrors()
    client = _FailingClient(KafkaError(31), errors)  # CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaClientError) as raised:
        cluster_metadata(client, "127.0.0.1:1", 3.0, errors)
    assert raised.value.name == "CLUSTER_AUTHORIZATION_FAILED"
    assert not raised.value.unreachable


def test_a_closed_port_is_unreachable_within_about_the_timeout(closed_port: int) -> None:
    bootstrap = f"127.0.0.1:{closed_port}"
    admin = KafkaAdmin(bootstrap, "strata-test", 1.0)
    started = time.monotonic()
    with pytest.raises(KafkaClientError) as raised:
        admin.metadata()
    assert time.monotonic() - started < 1.0 + kafka_admin.FUTURE_GRACE_S + 3.0
    error = raised.value
    assert error.unreachable and error.bootstrap == bootstrap and error.timeout_s == 1.0
    assert error.reason is not None and str(closed_port) in error.reason, error.reason


def _metadata(**topics: Any) -> Any:
    return SimpleNamespace(topics=topics)


def _topic(name: str, partitions: int, error: KafkaError | None = None) -> Any:
    return SimpleNamespace(topic=name, error=error,
                           partitions={p: SimpleNamespace(id=p) for p in range(partitions)})


def test_topic_of_finds_the_topic_or_says_it_does_not_exist() -> None:
    orders = _topic("orders", 3)
    metadata = _metadata(orders=orders, gone=_topic("gone", 0, KafkaError(3)),
                         odd=_topic("odd", 0, KafkaError(5, "no leader")))
    assert topic_of(metadata, "orders") is orders
    for missing in ("nope", "gone"):
        with pytest.raises(KafkaClientError) as raised:
            topic_of(metadata, missing)
        assert raised.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
        assert raised.value.message == f"topic {missing!r} does not exist"
    with pytest.raises(KafkaClientError) as raised:
        topic_of(metadata, "odd")
    assert (raised.value.name, raised.value.subject) == ("LEADER_NOT_AVAILABLE", "topic 'odd'")


def test_check_partitions_names_the_first_missing_partition() -> None:
    check_partitions(_topic("orders", 3), [0, 2])
    with pytest.raises(KafkaClientError) as raised:
        check_partitions(_topic("orders", 3), [1, 5, 7])
    assert raised.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert raised.value.message == "topic 'orders' has 3 partitions; there is no partition 5"


# ------------------------------------------------------------------------ waiting
@pytest.fixture
def admin(closed_port: int, monkeypatch: pytest.MonkeyPatch) -> KafkaAdmin:
    monkeypatch.setattr(kafka_admin, "FUTURE_GRACE_S", 0.0)
    return KafkaAdmin(f"127.0.0.1:{closed_port}", "strata-test", 1.0)


def test_a_future_without_an_answer_times_out_naming_its_subject(admin: KafkaAdmin) -> None:
    never: concurrent.futures.Future[Any] = concurrent.futures.Future()
    started = time.monotonic()
    with pytest.raises(KafkaClientError) as raised:
        admin.result(never, "the cluster", "DescribeCluster")
    assert time.monotonic() - started < 5.0
    error = raised.value
    assert error.timed_out and error.name == "_TIMED_OUT"
    assert error.message == "no answer about the cluster within 1s"


def test_a_failed_future_raises_its_kafka_error(admin: KafkaAdmin) -> None:
    failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
    failed.set_exception(KafkaException(KafkaError(36, "Topic 'x' already exists.")))
    with pytest.raises(KafkaClientError) as raised:
        admin.result(failed, "topic 'x'", "CreateTopics")
    assert (raised.value.name, raised.value.api) == ("TOPIC_ALREADY_EXISTS", "CreateTopics")
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    done.set_result(42)
    assert admin.result(done, "x", "Metadata") == 42


def test_an_admin_request_to_nobody_fails_within_its_bound(admin: KafkaAdmin) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaClientError) as raised:
        admin.list_consumer_groups()
    assert time.monotonic() - started < 5.0
    assert raised.value.api == "ListGroups" and raised.value.subject == "the consumer groups"


def test_offset_specs() -> None:
    assert repr(offset_spec("earliest")) == repr(kafka_admin.OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    assert repr(offset_spec("latest")) == repr(kafka_admin.OffsetSpec.latest())  # type: ignore[no-untyped-call]
    assert offset_spec(1_700_000_000_000)._value == 1_700_000_000_000


# ------------------------------------------------------------------------ ListOffsets retries
class _ListOffsetsClient:
    """``list_offsets`` answers each partition from a script: per call, its offset or the
    Kafka error code it fails with; records what each call asked for."""

    def __init__(self, script: dict[tuple[str, int], list[int | KafkaError]]) -> None:
        self.script = script
        self.calls: list[list[tuple[str, int]]] = []

    def list_offsets(self, requested: dict[Any, Any], request_timeout: float
                     ) -> dict[Any, concurrent.futures.Future[Any]]:
        self.calls.append([(tp.topic, tp.partition) for tp in requested])
        out = {}
        for tp in requested:
            answer = self.script[(tp.topic, tp.partition)].pop(0)
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            if isinstance(answer, KafkaError):
                future.set_exception(KafkaException(answer))
            else:
                future.set_result(SimpleNamespace(offset=answer))
            out[tp] = future
        return out


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _scripted_admin(closed_port: int, client: _ListOffsetsClient, clock: _Clock,
                    timeout_s: float = 30.0) -> KafkaAdmin:
    admin = KafkaAdmin(f"127.0.0.1:{closed_port}", "strata-test", timeout_s,
                       monotonic=clock.monotonic, sleep=clock.sleep)
    admin.client = client
    return admin


def test_list_offsets_asks_again_for_a_partition_whose_leader_has_not_taken_it_up(
        closed_port: int) -> None:
    """A topic just created: its leader answers NOT_LEADER_OR_FOLLOWER (6), then
    UNKNOWN_TOPIC_OR_PARTITION (3), then librdkafka finds no leader in its metadata (_NOENT),
    then its offset; only that partition is asked again, after the back-off."""
    client = _ListOffsetsClient({
        ("t", 0): [KafkaError(6), KafkaError(3), KafkaError(KafkaError._NOENT), 7],
        ("t", 1): [4]})
    clock = _Clock()
    admin = _scripted_admin(closed_port, client, clock)
    assert admin.list_offsets([("t", 0), ("t", 1), ("t", 0)], "latest") == {
        ("t", 0): 7, ("t", 1): 4}
    assert client.calls == [[("t", 0), ("t", 1)], [("t", 0)], [("t", 0)], [("t", 0)]]
    assert clock.slept == [kafka_admin.RETRY_BACKOFF_S] * 3


def test_list_offsets_gives_up_on_a_retriable_error_after_its_bound(closed_port: int) -> None:
    client = _ListOffsetsClient({("t", 0): [KafkaError(5)] * 1000})  # LEADER_NOT_AVAILABLE
    clock = _Clock()
    admin = _scripted_admin(closed_port, client, clock)
    with pytest.raises(KafkaClientError) as raised:
        admin.list_offsets([("t", 0)], "earliest")
    assert (raised.value.name, raised.value.api) == ("LEADER_NOT_AVAILABLE", "ListOffsets")
    assert kafka_admin.LIST_OFFSETS_RETRY_S - kafka_admin.RETRY_BACKOFF_S \
        <= clock.now <= kafka_admin.LIST_OFFSETS_RETRY_S
    # A client with a shorter timeout gives up within it.
    short = _Clock()
    client = _ListOffsetsClient({("t", 0): [KafkaError(5)] * 1000})
    with pytest.raises(KafkaClientError):
        _scripted_admin(closed_port, client, short, timeout_s=1.0).list_offsets(
            [("t", 0)], "earliest")
    assert short.now <= 1.0


def test_list_offsets_raises_any_other_error_at_once(closed_port: int) -> None:
    client = _ListOffsetsClient({("t", 0): [KafkaError(29)], ("t", 1): [3]})
    clock = _Clock()
    with pytest.raises(KafkaClientError) as raised:
        _scripted_admin(closed_port, client, clock).list_offsets([("t", 0), ("t", 1)],
                                                                 "latest")
    assert raised.value.name == "TOPIC_AUTHORIZATION_FAILED"
    assert raised.value.subject == "partition t-0" and clock.slept == []
