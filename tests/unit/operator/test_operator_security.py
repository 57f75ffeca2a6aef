"""A Broker's security spec: parsing and admission (schema + CEL), the objects built from it
(valid Kubernetes, secrets only by reference), the broker settings the real broker config
accepts, the entrypoint's TLS keystore and inter-broker login run by a real ``sh``, and the
client settings the admin service and the operator connect with."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from strata.broker.config import BrokerConfig
from strata.broker.network.listeners import (
    enabled_mechanisms,
    inter_broker_listener_name,
    protocol_map,
)
from strata.operator import admin_service, builders, crds
from strata.operator.client_security import client_properties
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.security.sasl import parse_jaas

from .test_operator_builders import K8S_VERSION, OWNER
from .test_operator_crds import admitted, broker, validate

NAMES = BrokerNames("events", "kafka")
SECURE: dict[str, Any] = {
    "metadata": {"managed": True},
    "listeners": {
        "plaintext": {"port": 9092},
        "secure": {"port": 9093, "tls": True, "authentication": {"type": "scram-sha-512"}},
        "mtls": {"port": 9094, "authentication": {"type": "tls"}},
    },
    "tls": {"secretName": "events-tls"},
    "interBroker": {"listener": "secure", "username": "broker",
                    "passwordSecret": {"name": "events-broker", "key": "pw"}},
    "authorization": {"type": "simple", "superUsers": ["User:ops"]},
    "admin": {"authentication": {"secretName": "events-admin-auth"},
              "tls": {"secretName": "events-admin-tls"}},
}


def secure(**changes: Any) -> dict[str, Any]:
    return {**SECURE, **changes}


def test_security_spec_parses_and_defaults_keep_plaintext() -> None:
    spec = BrokerSpec.parse(SECURE)
    assert [(lst.kafka_name, lst.protocol) for lst in spec.listeners.values()] == [
        ("MTLS", "SSL"), ("PLAINTEXT", "PLAINTEXT"), ("SECURE", "SASL_SSL")]
    assert spec.inter_broker_listener.name == "secure"
    assert spec.kafka_port == 9092
    plain = BrokerSpec.parse({"metadata": {"managed": True}})
    assert list(plain.listeners) == ["plaintext"] and plain.inter_broker_listener.port == 9092


@pytest.mark.parametrize(("spec", "message"), [
    (secure(tls={}), "tls.secretName"),
    (secure(interBroker={"listener": "secure"}), "interBroker.username"),
    (secure(interBroker={"listener": "nope"}), "not one of the listeners"),
    (secure(listeners={"a": {"port": 1}, "b": {"port": 1}}), "same port"),
    (secure(listeners={"Bad_Name": {"port": 1}}), "must match"),
    (secure(listeners={"a": {"authentication": {"type": "kerberos"}}}), "one of"),
    (secure(authorization={"type": "acl-ish"}), "authorization.type"),
])
def test_invalid_security_specs_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        BrokerSpec.parse(spec)


def test_admission_schema_and_cel() -> None:
    validate(broker(**{k: v for k, v in SECURE.items() if k != "metadata"}))
    # Without tls.secretName the operator makes the certificates: admitted.
    assert admitted(crds.BROKER_CRD, broker(listeners={"a": {"port": 9, "tls": True}}),
                    None) == []
    assert admitted(crds.BROKER_CRD, broker(**{k: v for k, v in SECURE.items()
                                               if k != "metadata"}), None) == []
    refused = {
        "listener names are lower-case letters and digits, at most 15":
            broker(listeners={"Bad_Name": {"port": 1}}),
        "every listener needs its own port":
            broker(listeners={"a": {"port": 9}, "b": {"port": 9}}),
        "interBroker.listener must be one of listeners":
            broker(listeners={"a": {"port": 9}}, interBroker={"listener": "b"}),
        "set either tls.secretName or tls.certManager, not both":
            broker(listeners={"a": {"port": 9, "tls": True}},
                   tls={"secretName": "s", "certManager": {"issuerRef": {"name": "ca"}}}),
    }
    for message, cr in refused.items():
        assert admitted(crds.BROKER_CRD, cr, None) == [message], message
    owned = broker(config={"super.users": "User:x"})
    assert admitted(crds.BROKER_CRD, owned, None) != []


def test_secure_objects_are_valid_and_hold_secrets_only_by_reference() -> None:
    spec = BrokerSpec.parse(SECURE)
    objects = builders.owned(builders.build_all(NAMES, spec), OWNER)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    text = repr(objects)
    assert "password=" not in text.replace('password=\\\\"${escaped}', "")
    sts = next(o for o in objects if o["kind"] == "StatefulSet"
               and o["metadata"]["name"] == "events")
    pod = sts["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["STRATA_INTER_BROKER_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "events-broker", "key": "pw"}}
    assert env["STRATA_LISTENERS"]["value"] == "MTLS:9094,PLAINTEXT:9092,SECURE:9093"
    assert {"name": "tls", "secret": {"secretName": "events-tls", "defaultMode": 0o440}} in \
        pod["volumes"]
    assert [p["containerPort"] for p in container["ports"]] == [9094, 9092, 9093, 9404]
    service = next(o for o in objects if o["metadata"]["name"] == "events-bootstrap")
    assert [p["name"] for p in service["spec"]["ports"]] == ["mtls", "kafka", "secure"]


def test_broker_settings_are_what_the_broker_reads() -> None:
    spec = BrokerSpec.parse(SECURE)
    props = builders.broker_properties(NAMES, spec)
    assert props["super.users"] == "User:ops;User:broker"
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="broker" password="p\\"w";')
    config = BrokerConfig.load(None, env={"STRATA_SASL_JAAS_CONFIG": jaas},
                               overrides={**props, "node.id": "0"})
    assert {k: v.value for k, v in protocol_map(config).items()} == {
        "MTLS": "SSL", "PLAINTEXT": "PLAINTEXT", "SECURE": "SASL_SSL"}
    assert inter_broker_listener_name(config) == "SECURE"
    assert enabled_mechanisms(config, "SECURE") == ("SCRAM-SHA-512",)
    assert parse_jaas(config.get("sasl.jaas.config") or "") == {"username": "broker",
                                                                "password": 'p"w'}


def test_entrypoint_builds_the_keystore_and_logs_in_without_leaking(tmp_path: Path) -> None:
    spec = BrokerSpec.parse(SECURE)
    script = tmp_path / "entrypoint.sh"
    script.write_text(builders.build_config_map(NAMES, spec)["data"]["entrypoint.sh"])
    config = tmp_path / "server.properties"
    config.write_text("metadata.store=etcd://e-0:2379\n")
    tls = tmp_path / "tls"
    tls.mkdir()
    (tls / "tls.crt").write_text("CERT\n")
    (tls / "tls.key").write_text("KEY\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "strata"  # records its arguments and the variables it was given
    fake.write_text(  # printf, not echo: dash's echo would interpret the backslashes
        '#!/bin/sh\nprintf "ARGS %s\\n" "$*"\nprintf "PW %s\\n" "${STRATA_USER_PASSWORD:-}"\n'
        'printf "JAAS %s\\n" "${STRATA_SASL_JAAS_CONFIG:-}"\n'
        'printf "LEFT %s\\n" "${STRATA_INTER_BROKER_PASSWORD:-gone}"\n')
    fake.chmod(0o755)
    keystore = tmp_path / "keystore.pem"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOSTNAME": "events-1",
           "STRATA_CONFIG": str(config), "STRATA_HEADLESS_SERVICE": "events-brokers.kafka.svc",
           "STRATA_KAFKA_PORT": "9092", "STRATA_LISTENERS": "PLAINTEXT:9092,SECURE:9093",
           "STRATA_PODINFO": str(tmp_path), "STRATA_TLS_DIR": str(tls),
           "STRATA_KEYSTORE": str(keystore), "STRATA_INTER_BROKER_USER": "broker",
           "STRATA_INTER_BROKER_PASSWORD": 'p"w\\x'}
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ARGS users create broker --metadata-store etcd://e-0:2379"
    assert lines[1] == 'PW p"w\\x'
    broker_args = lines[4]
    assert broker_args.startswith("ARGS broker --config")
    assert ("advertised.listeners=PLAINTEXT://events-1.events-brokers.kafka.svc:9092,"
            "SECURE://events-1.events-brokers.kafka.svc:9093") in broker_args
    jaas = lines[6].removeprefix("JAAS ")
    assert parse_jaas(jaas) == {"username": "broker", "password": 'p"w\\x'}
    assert lines[7] == "LEFT gone"  # the broker never sees (or logs) the password variable
    assert 'p"w' not in broker_args
    assert keystore.read_text() == "CERT\nKEY\n"
    assert stat.S_IMODE(keystore.stat().st_mode) == 0o600


def test_admin_service_logs_in_like_a_broker_and_guards_its_api() -> None:
    spec = BrokerSpec.parse(SECURE)
    deployment = admin_service.build_admin_deployment(NAMES, spec)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == [
        "strata", "admin", "--bootstrap-servers", "events-bootstrap.kafka.svc:9093",
        "--host", "0.0.0.0", "--port", "8080",
        "--auth-file", "/etc/strata/admin-auth/auth.json", "--authorization", "acl",
        "--super-users", "User:ops;User:broker",
        "--ssl-certfile", "/etc/strata/admin-tls/tls.crt",
        "--ssl-keyfile", "/etc/strata/admin-tls/tls.key"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env == {
        "STRATA_ADMIN_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "STRATA_ADMIN_KAFKA_SSL_CA_LOCATION": "/etc/strata/tls/ca.crt",
        "STRATA_ADMIN_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "STRATA_ADMIN_KAFKA_SASL_USERNAME": "broker",
        "STRATA_ADMIN_KAFKA_SASL_PASSWORD": {"secretKeyRef": {"name": "events-broker",
                                                              "key": "pw"}}}
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_operator_client_uses_pem_text_and_a_client_certificate_on_mtls() -> None:
    pem = {"ca.crt": "CA", "tls.crt": "CRT", "tls.key": "KEY"}
    assert client_properties(BrokerSpec.parse(SECURE), pem=pem) == {
        "security.protocol": "SASL_SSL", "ssl.ca.pem": "CA",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "broker"}
    mtls = BrokerSpec.parse(secure(interBroker={"listener": "mtls"}))
    assert client_properties(mtls, pem=pem) == {
        "security.protocol": "SSL", "ssl.ca.pem": "CA", "ssl.certificate.pem": "CRT",
        "ssl.key.pem": "KEY"}
    assert client_properties(BrokerSpec.parse({"metadata": {"managed": True}})) == {
        "security.protocol": "PLAINTEXT"}
