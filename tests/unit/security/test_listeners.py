"""Listener security settings: the protocol map, per-listener keys, advertised endpoints,
the inter-broker listener and its login, and TLS settings refused at startup."""

from __future__ import annotations

import pytest

from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.network.listeners import (
    SecurityProtocol,
    advertised_endpoints,
    enabled_mechanisms,
    inter_broker_client_security,
    inter_broker_listener_name,
    listener_value,
    parse_jaas,
    protocol_map,
    security_protocol,
)
from strata.broker.network.tls import server_context

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="s\\"ecret";')


def _config(**values: str) -> BrokerConfig:
    return BrokerConfig({key.replace("_", "."): value for key, value in values.items()})


def test_default_map_is_kafkas() -> None:
    config = BrokerConfig({})
    assert protocol_map(config) == {p.value: p for p in SecurityProtocol}
    assert security_protocol(config, "SASL_SSL").uses_tls
    assert security_protocol(config, "SASL_SSL").uses_sasl
    assert not security_protocol(config, "SSL").uses_sasl


def test_custom_map_and_unknown_listener() -> None:
    config = BrokerConfig({"listener.security.protocol.map": "INTERNAL:SASL_SSL,EXT:plaintext",
                           "listeners": "EXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"})
    assert security_protocol(config, "INTERNAL") is SecurityProtocol.SASL_SSL
    assert security_protocol(config, "EXT") is SecurityProtocol.PLAINTEXT
    with pytest.raises(ConfigError, match=r"not in listener\.security\.protocol\.map"):
        security_protocol(config, "OTHER")
    with pytest.raises(ConfigError, match="NAME:PROTOCOL"):
        protocol_map(BrokerConfig({"listener.security.protocol.map": "A:KERBEROS"}))


def test_listener_name_keys_win_and_are_not_unknown() -> None:
    config = BrokerConfig({"sasl.enabled.mechanisms": "PLAIN",
                           "listener.name.internal.sasl.enabled.mechanisms": "scram-sha-512"})
    assert listener_value(config, "INTERNAL", "sasl.enabled.mechanisms") == "scram-sha-512"
    assert enabled_mechanisms(config, "INTERNAL") == ("SCRAM-SHA-512",)
    assert enabled_mechanisms(config, "EXTERNAL") == ("PLAIN",)
    assert config.unknown_keys() == []
    with pytest.raises(ConfigError, match="GSSAPI"):
        enabled_mechanisms(BrokerConfig({"sasl.enabled.mechanisms": "GSSAPI"}), "X")


def test_advertised_endpoints_by_name_and_bound_ports() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:9093",
                           "advertised.listeners": "SSL://broker-0.example:19093"})
    assert advertised_endpoints(config, {"PLAINTEXT": 4242, "SSL": 9093}) == [
        ("PLAINTEXT", "127.0.0.1", 4242), ("SSL", "broker-0.example", 19093)]


def test_inter_broker_listener() -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
    assert inter_broker_listener_name(BrokerConfig({"listeners": listeners})) == "PLAINTEXT"
    assert inter_broker_listener_name(BrokerConfig({
        "listeners": listeners, "security.inter.broker.protocol": "SASL_SSL"})) == "SASL_SSL"
    assert inter_broker_listener_name(BrokerConfig({
        "listeners": listeners, "inter.broker.listener.name": "sasl_ssl"})) == "SASL_SSL"
    with pytest.raises(ConfigError):
        inter_broker_listener_name(BrokerConfig({
            "listeners": listeners, "inter.broker.listener.name": "OTHER"}))
    assert inter_broker_client_security(BrokerConfig({"listeners": listeners})) is None


def test_inter_broker_sasl_login_from_the_jaas_config() -> None:
    config = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS})
    security = inter_broker_client_security(config)
    assert security is not None and security.ssl_context is None
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-512", "broker", 's"ecret')
    missing = BrokerConfig({**config.explicit(),
                            "listener.name.internal.scram-sha-512.sasl.jaas.config": "x"})
    with pytest.raises(ConfigError, match="username"):
        inter_broker_client_security(missing)


def test_parse_jaas() -> None:
    assert parse_jaas(JAAS) == {"username": "broker", "password": 's"ecret'}


def test_tls_settings_refused_at_startup(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(BrokerConfig({}), "SSL")
    with pytest.raises(ConfigError, match="PEM"):
        server_context(BrokerConfig({"ssl.keystore.type": "JKS"}), "SSL")
    with pytest.raises(ConfigError, match="cannot load the keystore"):
        server_context(BrokerConfig({"ssl.keystore.location": "/nonexistent.pem"}), "SSL")
