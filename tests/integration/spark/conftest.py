"""Fixtures of the Spark suite: ONE local SparkSession and ONE broker for the whole run.

A SparkSession takes 10-25 s to start and its first query several more, so every test shares
``spark`` (``local[2,3]``: two threads, a task may be tried three times, which the at-least-once
writer relies on). ``SPARK_LOCAL_IP`` is loopback and ``PYSPARK_PYTHON`` the interpreter running
pytest, so executor workers import this checkout's ``strata.spark``. Tests don't disturb each
other's data: each makes its own topics (``new_topic``), so they share ``spark_broker``, a real
broker process on free loopback ports, stopped by PID at the end. Test data is produced with
confluent-kafka (``produce``), one record per entry, in order, to explicit partitions.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from strata.spark.session import get_session

from ..broker_process import BrokerProcess, running_broker

TIMEOUT_S = 30.0


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = get_session("strata-tests", master="local[2,3]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("spark-broker")) as started:
        yield started


@pytest.fixture
def bootstrap(spark_broker: BrokerProcess) -> str:
    return spark_broker.bootstrap


@dataclass(frozen=True)
class Record:
    """One record to produce; ``timestamp`` is epoch ms (CreateTime)."""

    partition: int
    value: bytes
    key: bytes | None = None
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    headers: tuple[tuple[str, bytes | None], ...] = ()


def new_topic(bootstrap: str, partitions: int, prefix: str = "t") -> str:
    """Create a topic with a unique name and wait until it exists."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)],
                                  operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[name].result(TIMEOUT_S)
    return name


def produce(bootstrap: str, topic: str, records: Sequence[Record]) -> None:
    """Produce ``records`` in order (idempotent, acks=all) and wait for every ack."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 2})
    for record in records:
        producer.produce(
            topic, value=record.value, key=record.key, partition=record.partition,
            timestamp=record.timestamp, headers=list(record.headers) or None,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    remaining = producer.flush(TIMEOUT_S)
    assert remaining == 0 and not failures, (remaining, failures)


def values(rows: Sequence[object]) -> list[bytes]:
    """The ``value`` column of collected rows, sorted."""
    return sorted(bytes(row["value"]) for row in rows)  # type: ignore[index]
