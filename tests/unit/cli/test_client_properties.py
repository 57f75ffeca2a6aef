"""``--command-config``: Java client properties become librdkafka's."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.cli.client_properties import (
    CommandConfigError,
    client_properties,
    load_client_properties,
)

JAVA_SASL_SSL = """\
# what a Kafka user hands kafka-topics.sh --command-config
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" \\
    password="p\\\\"w=d";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.crt
ssl.endpoint.identification.algorithm=
"""


def test_java_sasl_ssl_properties_become_librdkafka_properties() -> None:
    assert client_properties(JAVA_SASL_SSL) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'p"w=d',
        "ssl.ca.location": "/etc/kafka/ca.crt",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_pem_keystore_gives_certificate_and_key() -> None:
    props = client_properties("security.protocol: SSL\nssl.keystore.type PEM\n"
                              "ssl.keystore.location=/k/alice.pem\nssl.key.password=x\n")
    assert props == {"security.protocol": "SSL", "ssl.certificate.location": "/k/alice.pem",
                     "ssl.key.location": "/k/alice.pem", "ssl.key.password": "x"}


def test_librdkafka_properties_pass_through() -> None:
    text = "sasl.username=bob\nsasl.password=secret\nssl.ca.location=/ca.pem\n"
    assert client_properties(text) == {"sasl.username": "bob", "sasl.password": "secret",
                                       "ssl.ca.location": "/ca.pem"}


@pytest.mark.parametrize(("text", "named"), [
    ("ssl.truststore.type=JKS\nssl.truststore.location=/t.jks\n", "ssl.truststore.type=JKS"),
    ("ssl.keystore.type=PKCS12\n", "ssl.keystore.type=PKCS12"),
    ('sasl.jaas.config=x.PlainLoginModule required username="a";\n', "sasl.jaas.config"),
])
def test_unusable_properties_name_the_key(text: str, named: str) -> None:
    with pytest.raises(CommandConfigError, match=named.replace(".", r"\.")):
        client_properties(text)


def test_load_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "client.properties"
    with pytest.raises(CommandConfigError, match=r"cannot read .*client\.properties"):
        load_client_properties(missing)
    missing.write_text("ssl.keystore.type=JKS\n")
    with pytest.raises(CommandConfigError, match=r"client\.properties: ssl\.keystore\.type"):
        load_client_properties(missing)
