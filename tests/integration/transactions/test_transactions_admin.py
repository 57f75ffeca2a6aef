"""``strata transactions`` (Kafka's ``kafka-transactions.sh``) and the coordinator's metrics
against one real broker, with confluent-kafka's transactional producer as the peer.

A transaction a producer leaves open is listed Ongoing, described, found through its
partition's producers and aborted by its start offset: then the partition's last stable
offset (what a read_committed consumer may read up to) reaches the high watermark. A
transaction no coordinator knows (a transactional batch written under a producer id the
coordinator never gave out, what a lost marker leaves behind) is what ``find-hanging``
finds once it is older than ``--max-transaction-timeout``. The broker's ``/metrics`` counts a
commit and an abort. One broker for the module; every wait polls with a deadline.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from strata.protocol import ApiKey, ErrorCode
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import BrokerProcess, running_broker
from ..cli.conftest import Result, run_strata
from ..clients.wire import KafkaWire

pytestmark = pytest.mark.integration

STEP_S: Final = 15.0
# A hanging transaction cannot happen with KIP-890's partition verification (the leader asks
# the coordinator first and refuses the batch); it is what brokers before it, or with it off,
# could be left with, which is what find-hanging is for. So it is off on this module's broker.
OVERRIDES: Final = {"transaction.state.log.num.partitions": "5",
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                    "transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"), OVERRIDES) as started:
        yield started


@pytest.fixture
def cli(txn_broker: BrokerProcess) -> Callable[..., Result]:
    def run(*args: str) -> Result:
        return run_strata("transactions", *args, "--bootstrap-server", txn_broker.bootstrap,
                          "--timeout", "10", timeout=STEP_S * 2)
    return run


def create_topic(bootstrap: str) -> str:
    topic = f"txadm.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(STEP_S)
    return topic


def json_rows(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.ok().stdout.splitlines()]


def offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0: the end a read_committed and a
    read_uncommitted consumer see."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txadm-offsets",
                             "isolation.level": isolation})
        try:
            ends.append(consumer.get_watermark_offsets(TopicPartition(topic, 0), STEP_S)[1])
        finally:
            consumer.close()
    return ends[0], ends[1]


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STEP_S
    while not check():
        assert time.monotonic() < deadline, f"not within {STEP_S}s: {what}"
        time.sleep(0.1)


def open_transaction(bootstrap: str, topic: str, records: int = 3) -> tuple[Producer, str]:
    """A producer whose transaction holds ``records`` records of partition 0, left open."""
    tid = f"txadm-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 120_000, "message.timeout.ms": 10_000})
    producer.init_transactions(STEP_S)
    producer.begin_transaction()
    for i in range(records):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(STEP_S) == 0
    return producer, tid


def test_an_open_transaction_is_listed_described_and_aborted_by_its_start_offset(
        txn_broker: BrokerProcess, cli: Callable[..., Result]) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap)
    _producer, tid = open_transaction(bootstrap, topic)
    assert offsets(bootstrap, topic) == (0, 3)  # the open transaction holds the LSO at 0

    listed = json_rows(cli("list", "--format", "json"))
    assert {"transactional_id": tid, "coordinator": 1, "producer_id": listed[0]["producer_id"],
            "transaction_state": "Ongoing"} in listed
    ongoing = cli("list", "--state", "Ongoing").ok().stdout
    assert ongoing.splitlines()[0].split() == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert tid in ongoing
    assert tid not in cli("list", "--state", "CompleteCommit").ok().stdout
    assert tid in cli("list", "--duration-filter", "0").ok().stdout
    assert tid not in cli("list", "--duration-filter", "3600000").ok().stdout

    [described] = json_rows(cli("describe", "--transactional-id", tid, "--format", "json"))
    assert described["transaction_state"] == "Ongoing"
    assert described["topic_partitions"] == [f"{topic}-0"]
    assert described["transaction_timeout_ms"] == 120_000
    assert described["transaction_duration_ms"] >= 0

    [producer_state] = json_rows(cli("describe-producers", "--topic", topic, "--partition", "0",
                                     "--format", "json"))
    assert producer_state["current_transaction_start_offset"] == 0
    assert producer_state["producer_id"] == described["producer_id"]
    # The coordinator still counts the partition in the transaction: not hanging (Kafka's rule).
    assert json_rows(cli("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                         "--format", "json")) == []

    aborted = cli("abort", "--topic", topic, "--partition", "0", "--start-offset", "0").ok()
    assert f"producer {described['producer_id']}" in aborted.stderr
    wait_until(lambda: offsets(bootstrap, topic) == (4, 4), "the LSO reaches the high "
               "watermark (3 records and the ABORT marker)")
    [after] = json_rows(cli("describe-producers", "--topic", topic, "--partition", "0",
                            "--format", "json"))
    assert after["current_transaction_start_offset"] is None


def test_find_hanging_finds_a_transaction_no_coordinator_knows(
        txn_broker: BrokerProcess, cli: Callable[..., Result]) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap)
    with KafkaWire.to(bootstrap) as wire:
        init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1})
        assert init.error_code == ErrorCode.none
        pid, epoch = init.producer_id, init.producer_epoch
        record = RecordSpec(key=b"k", value=b"lost", timestamp=int(time.time() * 1000))
        batch = build_batch([record], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        produced = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": f"ghost-{uuid.uuid4().hex[:6]}", "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert [p.error_code for t in produced.responses for p in t.partition_responses] == [0]
    assert offsets(bootstrap, topic) == (0, 1)

    # Younger than the default 15 minutes: not reported yet.
    assert json_rows(cli("find-hanging", "--topic", topic, "--format", "json")) == []
    time.sleep(0.01)  # older than 0 minutes, measured in ms
    [hanging] = json_rows(cli("find-hanging", "--topic", topic, "--partition", "0",
                              "--max-transaction-timeout", "0", "--format", "json"))
    assert (hanging["topic"], hanging["partition"], hanging["producer_id"],
            hanging["producer_epoch"], hanging["start_offset"]) == (topic, 0, pid, epoch, 0)
    by_broker = json_rows(cli("find-hanging", "--broker-id", "1",
                              "--max-transaction-timeout", "0", "--format", "json"))
    assert hanging in by_broker

    cli("abort", "--topic", topic, "--partition", "0", "--producer-id", str(pid),
        "--producer-epoch", str(epoch), "--coordinator-epoch", "-1").ok()
    wait_until(lambda: offsets(bootstrap, topic) == (2, 2), "the LSO passes the abort marker")
    assert json_rows(cli("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                         "--format", "json")) == []


def test_errors_name_the_problem(txn_broker: BrokerProcess,
                                 cli: Callable[..., Result]) -> None:
    missing = cli("describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1
    assert missing.error_lines == ["strata transactions describe: TRANSACTIONAL_ID_NOT_FOUND: "
                                   "no coordinator knows transactional id 'no-such-id'"]
    topic = create_topic(txn_broker.bootstrap)
    nothing = cli("abort", "--topic", topic, "--partition", "0", "--start-offset", "5")
    assert nothing.returncode == 1
    assert "could not find any open transaction starting at offset 5" in nothing.stderr
    unknown = cli("describe-producers", "--topic", "no.such.topic", "--partition", "0")
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    bad_state = cli("list", "--state", "Sleeping")
    assert bad_state.returncode == 1 and "Sleeping" in bad_state.stderr
    assert cli("find-hanging").returncode == 2
    assert cli("abort", "--topic", topic, "--partition", "0").returncode == 2
    assert "Traceback" not in missing.stderr + nothing.stderr + unknown.stderr


def scrape(broker: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics",
                                timeout=STEP_S) as answer:
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name.startswith("strata_transaction_")}


def test_metrics_count_a_commit_and_an_abort(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap)
    producer, _tid = open_transaction(bootstrap, topic, records=1)
    # The coordinator's timer reports the open transaction at the next scrape.
    assert scrape(txn_broker)[("strata_transaction_count", (("state", "Ongoing"),))] >= 1
    before = scrape(txn_broker)
    producer.commit_transaction(STEP_S)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    assert producer.flush(STEP_S) == 0  # librdkafka sends no EndTxn for a transaction it never
    producer.abort_transaction(STEP_S)  # added a partition to

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return scrape(txn_broker).get(key, 0.0) - before.get(key, 0.0)

    wait_until(lambda: delta("strata_transaction_completed_total", result="commit") == 1
               and delta("strata_transaction_completed_total", result="abort") == 1,
               "one commit and one abort counted")
    for result in ("commit", "abort"):
        assert delta("strata_transaction_marker_write_latency_seconds_count",
                     result=result) == 1
    now = scrape(txn_broker)
    assert now[("strata_transaction_markers_pending_partitions", ())] == 0
    assert now[("strata_transaction_marker_unknown_destination_queue_size", ())] == 0
    assert now[("strata_transaction_marker_log_append_retry_queue_size", ())] == 0
    assert now[("strata_transaction_partition_load_time_max_seconds", ())] >= 0
    assert now[("strata_transaction_count", (("state", "CompleteAbort"),))] >= 1
