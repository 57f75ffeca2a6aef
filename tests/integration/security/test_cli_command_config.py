"""The client commands log in with ``--command-config``: the Java client properties a Kafka
user already has (SASL_SSL with SCRAM and a PEM trust store; mutual TLS with a PEM keystore)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from ..broker_process import STRATA
from .conftest import SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _strata(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STRATA), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _sasl_ssl_properties(path: Path, broker: SecureBroker, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="alice" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={broker.pki.ca.ca_cert}\n")
    return path


def test_topic_produce_consume_over_sasl_ssl(secure_broker: SecureBroker,
                                             tmp_path: Path) -> None:
    config = _sasl_ssl_properties(tmp_path / "client.properties", secure_broker,
                                  "alice-secret")
    bootstrap = f"127.0.0.1:{secure_broker.sasl_ssl}"
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    common = ("--bootstrap-server", bootstrap, "--timeout", "20")
    created = _strata("--command-config", str(config), "topic", "create", topic,
                      "--partitions", "1", *common)
    assert created.returncode == 0, created.stderr
    produced = subprocess.run(
        [str(STRATA), "--command-config", str(config), "produce", topic, *common],
        input="one\ntwo\n", capture_output=True, text=True, timeout=60, check=False)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [str(STRATA), "consume", topic, "--from", "earliest", "--count", "2", *common],
        env={"STRATA_COMMAND_CONFIG": str(config), "PATH": str(STRATA.parent)},
        capture_output=True, text=True, timeout=60, check=False)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["one", "two"]


def test_wrong_password_is_an_authentication_error(secure_broker: SecureBroker,
                                                   tmp_path: Path) -> None:
    config = _sasl_ssl_properties(tmp_path / "client.properties", secure_broker, "wrong")
    listed = _strata("--command-config", str(config), "topic", "list", "--bootstrap-server",
                     f"127.0.0.1:{secure_broker.sasl_ssl}", "--timeout", "10")
    assert listed.returncode == 1
    assert "authentication" in listed.stderr.lower(), listed.stderr


def test_mutual_tls_with_a_pem_keystore(secure_broker: SecureBroker, tmp_path: Path) -> None:
    pki = secure_broker.pki
    keystore = pki.client.keystore
    config = tmp_path / "mtls.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={pki.ca.ca_cert}\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n")
    listed = _strata("--command-config", str(config), "topic", "list", "--bootstrap-server",
                     f"127.0.0.1:{secure_broker.ssl}", "--timeout", "20")
    assert listed.returncode == 0, listed.stderr


def test_bad_command_config_is_a_usage_error(secure_broker: SecureBroker,
                                             tmp_path: Path) -> None:
    bootstrap = ("--bootstrap-server", f"127.0.0.1:{secure_broker.sasl_ssl}", "--timeout", "5")
    jks = tmp_path / "jks.properties"
    jks.write_text("ssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n")
    refused = _strata("--command-config", str(jks), "topic", "list", *bootstrap)
    assert refused.returncode == 2 and "ssl.truststore.type=JKS" in refused.stderr
    unknown = tmp_path / "unknown.properties"
    unknown.write_text("no.such.property=1\n")
    refused = _strata("--command-config", str(unknown), "topic", "list", *bootstrap)
    assert refused.returncode == 2 and "no.such.property" in refused.stderr, refused.stderr
