"""The operator's scale-down moves on a secured cluster: ``KafkaCluster.reassign`` reaches the
controller through a SASL_PLAINTEXT or SASL_SSL listener with exactly the librdkafka settings its
AdminClient uses (the TLS CA as PEM text, as the operator reads it from a Secret), and a refused
login is reported with its reason instead of "not served".

The broker is the package's ``secure_broker``: a single broker (no metadata store) answers every
move INVALID_REPLICA_ASSIGNMENT, an answer that proves the request passed TLS and the login. A
move actually carried out on a secured cluster: ``test_inter_broker.py``.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strata.operator.kafka import KafkaCluster, KafkaOperationError
from strata.operator.reassign import ReassignmentUnavailable, alter_partition_reassignments

from .conftest import SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

TIMEOUT_S = 10.0


def _sasl(mechanism: str, password: str = "alice-secret") -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password}


def _topic(bootstrap: str, config: dict[str, str]) -> str:
    name = f"moves-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({**config, "bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=TIMEOUT_S)
    return name


@pytest.mark.parametrize("listener", ["sasl_plaintext", "sasl_ssl"])
def test_reassign_logs_in_like_the_admin_client(secure_broker: SecureBroker,
                                                listener: str) -> None:
    port = getattr(secure_broker, listener)
    config = {"security.protocol": listener.upper(), **_sasl("SCRAM-SHA-512")}
    if listener == "sasl_ssl":
        config["ssl.ca.pem"] = secure_broker.pki.ca.ca_cert.read_text()
    bootstrap = f"127.0.0.1:{port}"
    topic = _topic(bootstrap, config)
    cluster = KafkaCluster(bootstrap, timeout=TIMEOUT_S, client_config=config)
    node = secure_broker.process.config["node.id"]
    assert cluster.assignment()[(topic, 0)] == (int(node),)
    with pytest.raises(KafkaOperationError, match=f"refused {topic}-0: INVALID_REPLICA_"
                                                  f"ASSIGNMENT, {topic}-1: INVALID_REPLICA"):
        cluster.reassign({(topic, 0): (int(node),), (topic, 1): (7,)})


def test_a_refused_login_is_unavailable_with_the_reason(secure_broker: SecureBroker) -> None:
    config = {"security.protocol": "SASL_PLAINTEXT", **_sasl("SCRAM-SHA-256", "wrong")}
    with pytest.raises(ReassignmentUnavailable,
                       match="SaslAuthenticate SCRAM-SHA-256 as alice: sasl_authentication"):
        alter_partition_reassignments("127.0.0.1", secure_broker.sasl_plaintext,
                                      {("any", 0): (1,)}, TIMEOUT_S, config)
    # A client that does not trust the brokers' CA never gets to log in.
    untrusted = {"security.protocol": "SASL_SSL", **_sasl("PLAIN"),
                 "ssl.ca.pem": secure_broker.pki.other_ca.ca_cert.read_text()}
    with pytest.raises(ReassignmentUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        alter_partition_reassignments("127.0.0.1", secure_broker.sasl_ssl,
                                      {("any", 0): (1,)}, TIMEOUT_S, untrusted)
