"""Fixtures of the security suite: a test PKI and one broker with every kind of listener.

``secure_broker`` (one for the package) serves four listeners on loopback::

    PLAINTEXT://127.0.0.1:<port>        (the BrokerProcess's own port: health of the broker)
    SASL_SSL://127.0.0.1:<port>         PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    SASL_PLAINTEXT://127.0.0.1:<port>   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    SSL://127.0.0.1:<port>              ssl.client.auth=required (mutual TLS)

with the users ``alice`` / ``alice-secret`` and ``bob`` / ``bob-secret`` created by the real
``strata users create`` CLI in its log dir before it starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ..broker_process import GROUPS_CONFIG, BrokerProcess, create_user, free_port, serving
from .certs import Issued, Pki

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@dataclass(frozen=True)
class PkiFiles:
    ca: Pki
    other_ca: Pki
    broker: Issued
    client: Issued  # subject CN=alice,OU=eng,O=Strata


@dataclass(frozen=True)
class SecureBroker:
    process: BrokerProcess
    pki: PkiFiles
    sasl_ssl: int
    sasl_plaintext: int
    ssl: int




@pytest.fixture(scope="package")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PkiFiles:
    directory = tmp_path_factory.mktemp("pki")
    ca = Pki(directory, "strata")
    return PkiFiles(ca, Pki(directory, "other"),
                   ca.issue("broker", "/CN=localhost/O=Strata", server=True),
                   ca.issue("alice", "/O=Strata/OU=eng/CN=alice"))


def tls_config(pki: PkiFiles) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker.keystore),
            "ssl.truststore.location": str(pki.ca.ca_cert)}


@pytest.fixture(scope="package")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: PkiFiles
                  ) -> Iterator[SecureBroker]:
    workdir = tmp_path_factory.mktemp("secure-broker")
    ports = [free_port() for _ in range(3)]
    broker = BrokerProcess(workdir)
    listeners = (f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{ports[0]},"
                 f"SASL_PLAINTEXT://127.0.0.1:{ports[1]},SSL://127.0.0.1:{ports[2]}")
    broker.config.update({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.ssl.ssl.client.auth": "required",
        "auto.create.topics.enable": "true", "num.partitions": "1", **GROUPS_CONFIG,
        **tls_config(pki)})
    for user, password in USERS.items():
        create_user(user, password, "--log-dir", str(broker.data_dir))
    with serving(broker):
        yield SecureBroker(broker, pki, *ports)
