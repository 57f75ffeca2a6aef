"""Quotas against real clients, beyond the byte-rate tests: ``request_percentage`` (KIP-124) —
a client over its share of the event loop is answered ``throttle_time_ms`` and muted
(librdkafka reports the throttle in its statistics, the broker in ``strata_quota_*``), while a
client without a quota, running the same loop at the same time, is neither throttled nor held
back — and throttled Fetches answered empty inside kafka-python's incremental fetch sessions
(KIP-227) lose and repeat nothing. Windows of 2 x 1 s, as in the byte-rate tests."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from strata.client.broker_client import BrokerClient
from strata.protocol.api_keys import ApiKey

from ..broker_process import BrokerProcess, running_broker

pytestmark = pytest.mark.integration

PERCENTAGE = 0.5  # 5 ms of the event loop per second
RUN_S = 5.0
TIMEOUT_S = 20.0
SESSION_PARTITIONS = 2
SESSION_RECORDS = 256  # per partition, 1000 bytes each: ~4 s of SESSION_QUOTA
SESSION_QUOTA = 128 * 1024
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("request-quota"), {
            "quota.window.num": "2", "quota.window.size.seconds": "1"}) as started:
        admin = AdminClient({"bootstrap.servers": started.bootstrap, "log_level": 0})
        for future in admin.create_topics([NewTopic("chatter", 1, 1),
                                           NewTopic("sessions", SESSION_PARTITIONS, 1)]).values():
            future.result(TIMEOUT_S)
        yield started


async def _set_quota(broker: BrokerProcess, client_id: str, key: str, value: float) -> None:
    client = BrokerClient("127.0.0.1", broker.port, client_id="quota-test",
                          request_timeout_s=TIMEOUT_S)
    try:
        response = await client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {
            "entries": [{"entity": [{"entity_type": "client-id", "entity_name": client_id}],
                         "ops": [{"key": key, "value": value, "remove": False}]}],
            "validate_only": False})
    finally:
        await client.close()
    assert [e.error_code for e in response.entries] == [0]


class RoundTrips:
    """One producer doing produce-and-wait round trips; what it saw."""

    def __init__(self, broker: BrokerProcess, client_id: str) -> None:
        self.client_id = client_id
        self.count = 0
        self.slowest_s = 0.0
        self.max_throttle_ms = 0
        self.producer = Producer({
            "bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 0,
            "acks": "1", "statistics.interval.ms": 200, "stats_cb": self._on_stats,
            "log_level": 0})

    def _on_stats(self, raw: str) -> None:
        for stats in json.loads(raw)["brokers"].values():
            self.max_throttle_ms = max(self.max_throttle_ms, stats["throttle"]["max"])

    def run(self, until: float) -> None:
        errors: list[Any] = []
        while time.monotonic() < until:
            started = time.monotonic()
            self.producer.produce("chatter", b"x", on_delivery=lambda e, _m: errors.append(e)
                                  if e is not None else None)
            assert self.producer.flush(TIMEOUT_S) == 0
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
            self.count += 1
        self.producer.flush(TIMEOUT_S)
        self.producer.poll(0.5)  # the last statistics
        assert errors == []


def _metrics(broker: BrokerProcess, **wanted: str) -> dict[str, float]:
    """The broker's series with exactly the labels ``wanted``, by name."""
    url = f"http://127.0.0.1:{broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.labels == wanted}


def _throttle_metric(broker: BrokerProcess, client_id: str) -> tuple[float, float]:
    """(strata_quota_throttle_time_ms_total, strata_quota_rate) of the client's Request sensor."""
    values = _metrics(broker, quota_type="Request", user="", client_id=client_id)
    return (values.get("strata_quota_throttle_time_ms_total", 0.0),
            values.get("strata_quota_rate", 0.0))


def test_a_client_over_request_percentage_is_throttled_and_another_is_not_slowed(
        broker: BrokerProcess) -> None:
    asyncio.run(_set_quota(broker, "chatty", "request_percentage", PERCENTAGE))
    chatty, free = RoundTrips(broker, "chatty"), RoundTrips(broker, "free")
    until = time.monotonic() + RUN_S
    threads = [threading.Thread(target=c.run, args=(until,)) for c in (chatty, free)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RUN_S + 2 * TIMEOUT_S)
        assert not thread.is_alive()
    throttle_total, rate = _throttle_metric(broker, "chatty")
    print(f"chatty: {chatty.count} round trips, throttled up to {chatty.max_throttle_ms} ms "
          f"(broker: {throttle_total:.0f} ms in all, {rate:.3f} % of the loop); free: "
          f"{free.count} round trips, slowest {free.slowest_s * 1000:.0f} ms")
    assert chatty.max_throttle_ms > 0  # the client saw throttle_time_ms
    assert throttle_total > 0  # and the broker counted it
    assert free.max_throttle_ms == 0  # no quota: never throttled ...
    assert free.count > 5 * chatty.count  # ... nor held back by the muted one
    assert free.slowest_s < 1.0  # a mute (up to one 1 s window) never reached it
    assert _throttle_metric(broker, "free") == (0.0, 0.0)  # not even measured


def test_throttled_fetches_in_an_incremental_session_lose_and_repeat_nothing(
        broker: BrokerProcess) -> None:
    # batches of 16 KiB: a fetch reads at least one whole batch (KIP-74), and a batch larger
    # than the quota window allows could never be fetched at all (nor in Kafka)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "batch.size": 16384, "log_level": 0})
    for partition in range(SESSION_PARTITIONS):
        for i in range(SESSION_RECORDS):
            producer.produce("sessions", b"x" * 1000, key=str(i).encode(), partition=partition)
            producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    asyncio.run(_set_quota(broker, "session-reader", "consumer_byte_rate", SESSION_QUOTA))
    before = _metrics(broker).get("strata_fetch_session_incremental_fetches_total", 0.0)
    # 32 KiB per partition: both fit the fetch's quota cap (one window, 128 KiB), so no
    # partition is cut inside its first batch (ReplicaManager does not yet answer such a
    # partition empty as Kafka does, and kafka-python refuses it)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="session-reader",
                             enable_auto_commit=False, fetch_max_wait_ms=50,
                             max_partition_fetch_bytes=32768, request_timeout_ms=30000)
    seen: dict[int, list[int]] = {p: [] for p in range(SESSION_PARTITIONS)}
    try:
        consumer.assign([KpTopicPartition("sessions", p) for p in range(SESSION_PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, seen.values())) < SESSION_PARTITIONS * SESSION_RECORDS:
            assert time.monotonic() < deadline, {p: len(o) for p, o in seen.items()}
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    seen[record.partition].append(record.offset)
        consumer.poll(timeout_ms=500)  # a little more: nothing may come twice
    finally:
        consumer.close()
    fetch = _metrics(broker, quota_type="Fetch", user="", client_id="session-reader")
    incremental = _metrics(broker)["strata_fetch_session_incremental_fetches_total"] - before
    print(f"session-reader: {fetch.get('strata_quota_throttled_requests_total', 0):.0f} "
          f"throttled fetches, {incremental:.0f} incremental fetches")
    assert seen == {p: list(range(SESSION_RECORDS)) for p in range(SESSION_PARTITIONS)}
    assert fetch.get("strata_quota_throttled_requests_total", 0) > 0
    assert incremental > 0
