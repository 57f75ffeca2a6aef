"""SASL and TLS with unchanged clients (confluent-kafka, kafka-python) and their usual configs.

One broker for the module (``secure_broker``: PLAINTEXT, SASL_SSL, SASL_PLAINTEXT and mutual-TLS
SSL listeners). Each test produces and consumes through one listener and mechanism, or shows a
refusal: a client trusting another CA, a plaintext client on a TLS port (disconnected, the
broker keeps serving), a wrong password (SASL_AUTHENTICATION_FAILED, then nothing more on that
connection).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from strata.client.broker_client import BrokerClient
from strata.client.security import ClientSecurity
from strata.protocol import RequestHeader, build_request, decode_response, encode_request
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.security.scram import salted_password

from ..raw_socket import closed_by_broker, read_frame
from . import logins
from .conftest import SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

TIMEOUT_S = 20.0


def _confluent_roundtrip(config: dict[str, Any]) -> None:
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 15000})
    delivered: list[Any] = []
    producer.produce(topic, b"v1", key=b"k", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None]
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                assert message.value() == b"v1"
                return
        raise AssertionError(f"nothing consumed from {topic} in {TIMEOUT_S}s")
    finally:
        consumer.close()


def _kafka_python_roundtrip(config: dict[str, Any]) -> None:
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**config, acks="all", request_timeout_ms=15000)
    try:
        producer.send(topic, b"v1").get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, **config, auto_offset_reset="earliest",
                             consumer_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        first = next(iter(consumer), None)  # stops at the first record, or after the timeout
    finally:
        consumer.close()
    assert first is not None and first.value == b"v1"


def _confluent_sasl_ssl(secure_broker: SecureBroker, mechanism: str,
                        user: str) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` (password ``<user>-secret``) on SASL_SSL."""
    return {
        "bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_ssl}",
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.username": user, "sasl.password": f"{user}-secret",
        "ssl.ca.location": str(secure_broker.pki.ca.ca_cert)}


def test_sasl_ssl_scram_sha_512_confluent(secure_broker: SecureBroker) -> None:
    _confluent_roundtrip(_confluent_sasl_ssl(secure_broker, "SCRAM-SHA-512", "alice"))


def test_sasl_ssl_plain_kafka_python(secure_broker: SecureBroker) -> None:
    context = ssl.create_default_context(cafile=str(secure_broker.pki.ca.ca_cert))
    _kafka_python_roundtrip({
        "bootstrap_servers": f"127.0.0.1:{secure_broker.sasl_ssl}",
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret",
        "ssl_context": context})


def test_sasl_ssl_plain_confluent(secure_broker: SecureBroker) -> None:
    _confluent_roundtrip(_confluent_sasl_ssl(secure_broker, "PLAIN", "bob"))


def test_sasl_plaintext_scram_sha_256_kafka_python(secure_broker: SecureBroker) -> None:
    _kafka_python_roundtrip({
        "bootstrap_servers": f"127.0.0.1:{secure_broker.sasl_plaintext}",
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})


def test_mutual_tls_principal_from_certificate(secure_broker: SecureBroker) -> None:
    pki = secure_broker.pki
    _confluent_roundtrip({
        "bootstrap.servers": f"127.0.0.1:{secure_broker.ssl}", "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca.ca_cert),
        "ssl.certificate.location": str(pki.client.cert),
        "ssl.key.location": str(pki.client.key)})
    log = secure_broker.process.log_path.read_text()
    assert "on listener SSL is User:CN=alice,OU=eng,O=Strata" in log


def test_metadata_advertises_the_listener_connected_to(secure_broker: SecureBroker) -> None:
    admin = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_plaintext}",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [
        ("127.0.0.1", secure_broker.sasl_plaintext)]


def _tls_handshake_fails(port: int, context: ssl.SSLContext) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                return False
        except ssl.SSLError:
            return True


def test_client_trusting_another_ca_fails(secure_broker: SecureBroker) -> None:
    other = secure_broker.pki.other_ca.ca_cert
    assert _tls_handshake_fails(secure_broker.sasl_ssl, ssl.create_default_context(
        cafile=str(other)))
    admin = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_ssl}",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret",
        "ssl.ca.location": str(other)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_mutual_tls_without_a_client_certificate_fails(secure_broker: SecureBroker) -> None:
    context = ssl.create_default_context(cafile=str(secure_broker.pki.ca.ca_cert))
    with socket.create_connection(("127.0.0.1", secure_broker.ssl), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        # TLS 1.3: the server's refusal of a missing certificate arrives with the first read.
        tls.sendall(_frame(ApiKey.API_VERSIONS, 0, {}, 1))
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            if not tls.recv(4):
                raise ConnectionResetError("closed")


def _frame(api_key: int, version: int, fields: dict[str, Any], correlation_id: int) -> bytes:
    body = build_request(api_key, version, fields)
    return encode_request(RequestHeader(api_key, version, correlation_id, "sec-test"), body)


def _read_answer(sock: socket.socket, api_key: int, version: int) -> Any:
    _, body = decode_response(read_frame(sock), api_key, version)
    return body


def test_plaintext_client_on_tls_port_is_disconnected(secure_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.sasl_ssl), timeout=10) as sock:
        sock.sendall(_frame(ApiKey.API_VERSIONS, 0, {}, 1))
        try:
            data = sock.recv(4096)
            # An SSL alert may come back before the close, never a Kafka answer.
            while data and not data.startswith(b"\x15"):
                data = sock.recv(4096)
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
    # The broker keeps serving, TLS clients included.
    test_sasl_ssl_scram_sha_512_confluent(secure_broker)


def test_wrong_password_fails_and_nothing_else_works(secure_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.sasl_plaintext),
                                  timeout=10) as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 1))
        assert _read_answer(sock, ApiKey.SASL_HANDSHAKE, 1).error_code == ErrorCode.none
        sock.sendall(_frame(ApiKey.SASL_AUTHENTICATE, 1,
                            {"auth_bytes": b"\x00alice\x00wrong"}, 2))
        answer = _read_answer(sock, ApiKey.SASL_AUTHENTICATE, 1)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        sock.sendall(_frame(ApiKey.METADATA, 8, {"topics": None,
                                                  "allow_auto_topic_creation": False,
                                                  "include_cluster_authorized_operations": False,
                                                  "include_topic_authorized_operations": False},
                            3))
        assert closed_by_broker(sock)
    admin = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_plaintext}",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "wrong"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def _admin_request(port: int, api_key: int, fields: dict[str, Any]) -> Any:
    """One request as alice over SASL/SCRAM-SHA-512 with Strata's own ``BrokerClient``."""
    security = ClientSecurity(None, "SCRAM-SHA-512", "alice", "alice-secret")

    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, client_id="admin",
                              request_timeout_s=TIMEOUT_S, security=security)
        try:
            return await client.request(api_key, 0, fields)
        finally:
            await client.close()

    return asyncio.run(send())


def test_scram_users_through_the_kafka_admin_api(secure_broker: SecureBroker) -> None:
    """Alter/DescribeUserScramCredentials from a SASL-authenticated client (Strata's codec), then
    a login as the new user."""
    port = secure_broker.sasl_plaintext
    salt = b"some-salt-0123456789"
    altered = _admin_request(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
        "deletions": [], "upsertions": [{
            "name": "carol", "mechanism": 1, "iterations": 4096, "salt": salt,
            "salted_password": salted_password("SCRAM-SHA-256", "carol-secret", salt, 4096)}]})
    assert [(r.user, r.error_code) for r in altered.results] == [("carol", ErrorCode.none)]
    described = _admin_request(port, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                               {"users": [{"name": "carol"}, {"name": "dave"}]})
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results] == [("carol", ErrorCode.none, [(1, 4096)]),
                                             ("dave", ErrorCode.resource_not_found, [])]
    _kafka_python_roundtrip({
        "bootstrap_servers": f"127.0.0.1:{port}",
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "carol", "sasl_plain_password": "carol-secret"})
    deletion = {"deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []}
    deleted = _admin_request(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletion)
    assert [r.error_code for r in deleted.results] == [ErrorCode.none]
    again = _admin_request(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletion)
    assert [r.error_code for r in again.results] == [ErrorCode.resource_not_found]
    refused = _admin_request(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
        "deletions": [], "upsertions": [{"name": "erin", "mechanism": 1, "iterations": 10,
                                         "salt": salt, "salted_password": b"x"}]})
    assert [r.error_code for r in refused.results] == [ErrorCode.unacceptable_credential]


def test_scram_users_through_confluent_kafka_admin(secure_broker: SecureBroker) -> None:
    """confluent-kafka's ``alter_user_scram_credentials`` (librdkafka's AlterUserScramCredentials
    v0, whose body is followed by a second empty tag buffer) creates a user that can log in,
    replaces its password, and deletes it."""
    config = {"bootstrap.servers": f"127.0.0.1:{secure_broker.sasl_plaintext}",
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}
    admin = AdminClient({**config, "sasl.username": "alice", "sasl.password": "alice-secret"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)

    def alter(change: Any) -> None:
        for future in admin.alter_user_scram_credentials([change]).values():
            future.result(timeout=TIMEOUT_S)

    def can_log_in(password: str) -> bool:
        return logins.can_log_in({**config, "sasl.username": "frank", "sasl.password": password},
                                 TIMEOUT_S)

    alter(UserScramCredentialUpsertion("frank", info, b"frank-1"))
    assert can_log_in("frank-1")
    alter(UserScramCredentialUpsertion("frank", info, b"frank-2"))
    assert can_log_in("frank-2") and not can_log_in("frank-1")
    described = admin.describe_user_scram_credentials(["frank"])["frank"].result(
        timeout=TIMEOUT_S)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    alter(UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_512))
    assert not can_log_in("frank-2")
