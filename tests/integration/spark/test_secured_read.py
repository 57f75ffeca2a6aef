"""Batch reads through ``format("strata")`` from a secured broker: SASL_SSL with SCRAM-SHA-512
and mutual-TLS SSL, with the ``kafka.*`` options a Spark user passes (librdkafka's names).

The broker is the security suite's (``secure_broker``: SASL_SSL, SASL_PLAINTEXT and SSL
listeners beside PLAINTEXT, users made by ``strata users create``). Each Spark task reads its
offset range over its own TLS + SASL connection (:mod:`strata.spark.broker_connection`). A
wrong password or a broker certificate from another CA makes the executor's read raise
``AuthenticationError`` naming the refusal, rather than retry until
``kafkaConsumer.pollTimeoutMs``; a client without the certificate the mutual-TLS listener
requires is disconnected, retried, and told what that disconnection means.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from strata.spark.broker_connection import AuthenticationError
from strata.spark.offsets import OffsetRange
from strata.spark.options import parse_source_options
from strata.spark.partition_fetcher import read_range_direct, supports

from ..security import conftest as security
from ..security.conftest import USERS, SecureBroker
from .conftest import Record, new_topic, produce, values

# The security suite's fixtures, used here as they are: its test PKI and secured broker.
pki = security.pki
secure_broker = security.secure_broker

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(180)]


def sasl_ssl(broker: SecureBroker, password: str = USERS["alice"]) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": password, "ssl.ca.location": str(broker.pki.ca.ca_cert)}


def mutual_tls(broker: SecureBroker) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ssl}", "security.protocol": "SSL",
            "ssl.ca.location": str(broker.pki.ca.ca_cert),
            "ssl.certificate.location": str(broker.pki.client.cert),
            "ssl.key.location": str(broker.pki.client.key)}


def read(spark: SparkSession, client: dict[str, str], **options: Any) -> DataFrame:
    return (spark.read.format("strata")
            .options(**{f"kafka.{key}": value for key, value in client.items()})
            .options(**options).load())


@pytest.fixture
def topic(secure_broker: SecureBroker) -> str:
    """A topic of 2 partitions holding 50 records each (produced on the PLAINTEXT listener)."""
    name = new_topic(secure_broker.process.bootstrap, 2, prefix="secured")
    produce(secure_broker.process.bootstrap, name,
            [Record(i % 2, f"{name}/{i}".encode(), key=b"k%d" % i) for i in range(100)])
    return name


@pytest.mark.parametrize("login", [sasl_ssl, mutual_tls], ids=["sasl-ssl-scram", "mutual-tls"])
def test_a_secured_cluster_is_read_on_the_direct_path(
    spark: SparkSession, secure_broker: SecureBroker, topic: str, login: Any
) -> None:
    client = login(secure_broker)
    options = parse_source_options(
        {f"kafka.{key}": value for key, value in client.items()} | {"subscribe": topic},
        streaming=False)
    assert supports(options)  # not librdkafka's per-record Messages

    rows = read(spark, client, subscribe=topic).collect()

    assert values(rows) == sorted(f"{topic}/{i}".encode() for i in range(100))
    assert {(row.partition, row.key) for row in rows} == {
        (i % 2, b"k%d" % i) for i in range(100)}


def direct_read(broker: SecureBroker, client: dict[str, str], topic: str) -> int:
    """Rows read by the executor side's direct path alone (no Spark), with a 5 s poll timeout:
    a retry loop would end in TimeoutError, not in the error the tests expect."""
    options = parse_source_options(
        {f"kafka.{key}": value for key, value in client.items()}
        | {"subscribe": topic, "kafkaConsumer.pollTimeoutMs": "5000"}, streaming=False)
    assert supports(options)
    return sum(batch.num_rows for batch in read_range_direct(options, OffsetRange(topic, 0, 0, 50)))


def test_a_wrong_password_is_refused_at_once_naming_the_refusal(
    secure_broker: SecureBroker, topic: str
) -> None:
    wrong = sasl_ssl(secure_broker, password="not-" + USERS["alice"])
    with pytest.raises(AuthenticationError, match="sasl_authentication_failed"):
        direct_read(secure_broker, wrong, topic)
    # The broker keeps serving the right login.
    assert direct_read(secure_broker, sasl_ssl(secure_broker), topic) == 50


def test_a_client_without_the_required_certificate_is_told_what_the_closed_connection_means(
    secure_broker: SecureBroker, topic: str
) -> None:
    # The broker refuses the handshake by closing the connection (no TLS alert), which looks
    # like any lost connection: retried until the poll timeout, then named.
    anonymous = {key: value for key, value in mutual_tls(secure_broker).items()
                 if not key.startswith(("ssl.certificate", "ssl.key"))}
    with pytest.raises(TimeoutError, match="refuses the client's certificate"):
        direct_read(secure_broker, anonymous, topic)


def test_a_broker_certificate_from_another_ca_is_refused(
    secure_broker: SecureBroker, topic: str
) -> None:
    untrusted = {**mutual_tls(secure_broker),
                 "ssl.ca.location": str(secure_broker.pki.other_ca.ca_cert)}
    with pytest.raises(AuthenticationError, match="certificate verify failed"):
        direct_read(secure_broker, untrusted, topic)
