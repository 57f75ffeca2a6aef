"""Operator-made certificates: the pure builders (``certificates``), the staged CA rotation
(``ca_rotation``), the cert-manager ``Certificate`` (``cert_manager``), and ``cluster_ca``'s
two steps against an in-memory API server with an injected clock."""

from __future__ import annotations

import base64
import datetime
import os
import ssl
import subprocess
from collections.abc import Mapping
from typing import Any, cast

import jsonschema
import pytest

from strata.operator import builders, ca_rotation, certificates, cluster_ca, tls_users
from strata.operator.cert_manager import CERTIFICATE_SCHEMA, build_certificate
from strata.operator.kube import Kube
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.operator.user_spec import UserSpec

NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
NAMES = BrokerNames("events", "prod")


def ca(name: str = "test CA", now: datetime.datetime = NOW) -> certificates.KeyPair:
    return certificates.new_ca(name, now, 1000 * DAY)


# ------------------------------------------------------------------------------ certificates
def test_an_issued_certificate_verifies_against_its_ca_only(tmp_path: Any) -> None:
    authority, other = ca(), ca("other CA")
    leaf = certificates.issue(authority, "events-broker", NOW, 30 * DAY,
                              sans=["events-0.events-brokers.prod.svc", "127.0.0.1"])
    assert certificates.issued_by(leaf.cert, authority.cert)
    assert not certificates.issued_by(leaf.cert, other.cert)
    assert certificates.sans_of(leaf.cert) == ["events-0.events-brokers.prod.svc", "127.0.0.1"]
    assert certificates.subject_of(leaf.cert) == "CN=events-broker,O=strata.dev"
    # OpenSSL (what the broker and librdkafka use) agrees: it loads the chain and the key.
    (tmp_path / "ca.pem").write_text(authority.cert)
    (tmp_path / "leaf.pem").write_text(leaf.cert + leaf.key)
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    context.load_cert_chain(str(tmp_path / "leaf.pem"))


def test_a_user_certificate_subject_is_the_bare_common_name() -> None:
    leaf = certificates.issue(ca(), "alice", NOW, 30 * DAY, organization=None, server=False)
    assert certificates.subject_of(leaf.cert) == "CN=alice"
    assert certificates.sans_of(leaf.cert) == []


def test_validity_is_capped_by_the_ca_and_renewal_uses_the_injected_clock() -> None:
    short = certificates.new_ca("short CA", NOW, 10 * DAY)
    leaf = certificates.issue(short, "x", NOW, 365 * DAY)
    assert certificates.not_after(leaf.cert) == certificates.not_after(short.cert)
    assert not certificates.needs_renewal(leaf.cert, NOW, 5 * DAY)
    assert certificates.needs_renewal(leaf.cert, NOW + 5 * DAY, 5 * DAY)


def test_bundles_split_back_into_their_certificates() -> None:
    a, b = ca("a").cert, ca("b").cert
    text = certificates.bundle([a, b, a])
    assert certificates.split_bundle(text) == [a, b]


# ------------------------------------------------------------------------------ rotation
def test_rotation_goes_through_its_three_stages_in_order() -> None:
    made = iter([ca("first"), ca("second")])
    state = ca_rotation.initial(lambda: next(made))
    first = state.data["ca.crt"]
    assert state.stage == ca_rotation.IDLE and state.trusted == [first]
    assert not ca_rotation.should_start(state, False, NOW, 30 * DAY)
    assert ca_rotation.should_start(state, True, NOW, 30 * DAY)
    assert ca_rotation.should_start(state, False, NOW + 980 * DAY, 30 * DAY)  # near its end

    trust_both = ca_rotation.advance(state, lambda: next(made))
    second = trust_both.data["next.crt"]
    assert trust_both.stage == ca_rotation.TRUST_NEW_CA
    assert trust_both.trusted == [first, second] and trust_both.issuer.cert == first
    assert not ca_rotation.should_start(trust_both, True, NOW, 30 * DAY)  # one at a time

    reissue = ca_rotation.advance(trust_both, lambda: pytest.fail("no new CA now"))
    assert reissue.stage == ca_rotation.REISSUE_CERTIFICATES
    assert reissue.issuer.cert == second and reissue.trusted == [second, first]
    assert "ca.key" in reissue.data and "next.key" not in reissue.data

    drop = ca_rotation.advance(reissue, lambda: pytest.fail("no new CA now"))
    assert drop.stage == ca_rotation.DROP_OLD_CA and drop.trusted == [second]
    done = ca_rotation.advance(drop, lambda: pytest.fail("no new CA now"))
    assert done.stage == ca_rotation.IDLE and done.trusted == [second]


def sans(pod: str) -> list[str]:
    return ca_rotation.pod_sans(pod, "events-brokers.prod.svc", "events-bootstrap",
                                "events-bootstrap.prod.svc", ["127.0.0.1"])


def plan(existing: Mapping[str, str], issuer: certificates.KeyPair, trust: str, pods: int,
         now: datetime.datetime = NOW) -> ca_rotation.BrokerCertsPlan:
    return ca_rotation.plan_broker_certs(
        existing, trust, issuer, {f"events-{i}": sans(f"events-{i}") for i in range(pods)},
        "events-broker", now, 365 * DAY, 30 * DAY)


def test_broker_certificates_name_each_pod_and_a_scale_up_only_adds() -> None:
    authority = ca()
    first = plan({}, authority, authority.cert, 2)
    assert first.changed and first.reissued == ("tls", "events-0", "events-1")
    cert = first.data["events-1.crt"]
    assert certificates.issued_by(cert, authority.cert)
    assert "events-1.events-brokers.prod.svc" in certificates.sans_of(cert)
    assert "events-bootstrap.prod.svc" in certificates.sans_of(cert)
    assert certificates.sans_of(first.data["tls.crt"]) == []  # the operator's client cert
    assert not plan(first.data, authority, authority.cert, 2).changed  # idempotent
    grown = plan(first.data, authority, authority.cert, 3)
    assert grown.reissued == ("events-2",)
    assert grown.data["tls.crt"] == first.data["tls.crt"]  # the config hash stays: no roll


def test_a_new_issuer_or_a_near_end_reissues_everything() -> None:
    old, new = ca("old"), ca("new")
    data = plan({}, old, old.cert, 2).data
    bundle = certificates.bundle([new.cert, old.cert])
    trust_only = plan(data, old, bundle, 2)
    assert trust_only.changed and trust_only.reissued == ()
    assert trust_only.data["ca.crt"] == bundle
    reissued = plan(trust_only.data, new, bundle, 2)
    assert reissued.reissued == ("tls", "events-0", "events-1")
    assert all(certificates.issued_by(reissued.data[f"{n}.crt"], new.cert)
               for n in ("tls", "events-0", "events-1"))
    assert plan(data, old, old.cert, 2, NOW + 340 * DAY).reissued[0] == "tls"


# ------------------------------------------------------------------------------ spec + builders
def operator_made(**tls: Any) -> BrokerSpec:
    return BrokerSpec.parse({"listeners": {"plaintext": {"port": 9092},
                                           "tls": {"port": 9093, "tls": True}},
                             "metadata": {"etcd": {"endpoints": ["e:2379"]}},
                             **({"tls": tls} if tls else {})}, "events")


def test_a_tls_listener_without_a_secret_gets_operator_made_certificates() -> None:
    spec = operator_made()
    assert spec.certificates.source == "operator"
    assert spec.security.tls_secret == "events-broker-certs"
    container = builders.build_pod_template(NAMES, spec)["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STRATA_TLS_PER_POD"] == "1"
    assert 'cert="${HOSTNAME}"' in builders.ENTRYPOINT
    with pytest.raises(SpecError, match="Broker's name"):
        BrokerSpec.parse({"listeners": {"a": {"port": 1, "tls": True}}})


def test_the_broker_certificate_subject_is_a_super_user_on_an_mtls_inter_broker_listener(
        ) -> None:
    spec = BrokerSpec.parse({"listeners": {"mtls": {"port": 9093, "tls": True,
                                                    "authentication": {"type": "tls"}}},
                             "authorization": {"type": "simple"},
                             "metadata": {"etcd": {"endpoints": ["e:2379"]}}}, "events")
    assert builders.super_users(spec) == ["User:CN=events-broker,O=strata.dev"]


def test_cert_manager_mode_builds_a_valid_certificate() -> None:
    spec = operator_made(certManager={"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
                         alternativeNames=["kafka.example.com", "10.0.0.7"], validityDays=90,
                         renewalDays=15)
    assert spec.certificates.source == "cert-manager"
    assert "STRATA_TLS_PER_POD" not in str(builders.build_pod_template(NAMES, spec))
    cert = build_certificate(NAMES, spec)
    jsonschema.validate(cert, CERTIFICATE_SCHEMA)
    assert cert["spec"]["secretName"] == spec.security.tls_secret == "events-broker-certs"
    assert "*.events-brokers.prod.svc" in cert["spec"]["dnsNames"]
    assert "kafka.example.com" in cert["spec"]["dnsNames"]
    assert cert["spec"]["ipAddresses"] == ["10.0.0.7"]
    assert (cert["spec"]["duration"], cert["spec"]["renewBefore"]) == ("2160h", "360h")
    assert cert["spec"]["issuerRef"] == {"name": "ca", "kind": "ClusterIssuer",
                                         "group": "cert-manager.io"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**cert, "spec": {**cert["spec"], "duration": "90 days"}},
                            CERTIFICATE_SCHEMA)


# ------------------------------------------------------------------------------ cluster_ca
def merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class Api:
    """Secrets, Events and the Broker's metadata, in memory."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[str] = []

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, name))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Event":
            self.events.append(obj["reason"])
        else:
            self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return obj

    def patch(self, kind: str, namespace: str | None, name: str,
              patch: dict[str, Any]) -> dict[str, Any]:
        obj = merge(self.objects.get((kind, name), {}), patch)
        self.objects[(kind, name)] = obj
        return obj

    def apply(self, obj: dict[str, Any]) -> str:
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return "created"


def secret(api: Api, name: str) -> dict[str, str]:
    return {k: base64.b64decode(v).decode()
            for k, v in api.objects[("Secret", name)]["data"].items()}


BODY = {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
        "metadata": {"name": "events", "namespace": "prod", "uid": "u-1"}}


def one_pass(api: Api, spec: BrokerSpec, settled: bool,
             forced: bool = False) -> dict[str, Any] | None:
    body = {**BODY, "metadata": {**BODY["metadata"], "annotations": {
        ca_rotation.FORCE_RENEW_ANNOTATION: "true"} if forced else {}}}
    kube = cast(Kube, api)  # the calls cluster_ca makes, in memory
    prepared = cluster_ca.prepare(kube, body, NAMES, spec, 2, now=lambda: NOW)
    return cluster_ca.finish(kube, body, NAMES, spec, prepared, settled, now=lambda: NOW)


def test_cluster_ca_rotation_advances_one_stage_per_settled_roll() -> None:
    api, spec = Api(), operator_made()
    status = one_pass(api, spec, settled=False)
    assert status is not None and status["caRotation"] == ""
    first_ca = secret(api, "events-cluster-ca")["ca.crt"]
    certs = secret(api, "events-broker-certs")
    assert certs["ca.crt"] == first_ca and {"events-0.crt", "events-1.key"} <= set(certs)
    assert one_pass(api, spec, settled=True) == status  # nothing to rotate: nothing changes

    stages = []
    status = one_pass(api, spec, settled=False, forced=True)  # stage 1 written, not rolled
    assert api.objects[("Broker", "events")]["metadata"]["annotations"] == {}
    stages.append(status and status["caRotation"])
    for _ in range(3):  # each settled roll moves on one stage
        status = one_pass(api, spec, settled=True)
        stages.append(status and status["caRotation"])
        one_pass(api, spec, settled=False)  # the next stage's Secret is written: a roll
    assert stages == [ca_rotation.TRUST_NEW_CA, ca_rotation.REISSUE_CERTIFICATES,
                      ca_rotation.DROP_OLD_CA, ""]
    assert api.events == [cluster_ca.CA_CERTIFICATES_ISSUED, cluster_ca.CA_ROTATION,
                          cluster_ca.CA_ROTATION, cluster_ca.CA_CERTIFICATES_ISSUED,
                          cluster_ca.CA_ROTATION, ca_rotation.COMPLETE]
    new_ca = secret(api, "events-cluster-ca")["ca.crt"]
    assert new_ca != first_ca and set(secret(api, "events-cluster-ca")) == {"ca.crt", "ca.key"}
    certs = secret(api, "events-broker-certs")
    assert certs["ca.crt"] == new_ca
    assert certificates.issued_by(certs["events-0.crt"], new_ca)


def test_the_clients_ca_is_trusted_when_a_listener_takes_client_certificates() -> None:
    api = Api()
    spec = BrokerSpec.parse({"listeners": {"mtls": {"port": 9093, "tls": True,
                                                    "authentication": {"type": "tls"}}},
                             "metadata": {"etcd": {"endpoints": ["e:2379"]}}}, "events")
    one_pass(api, spec, settled=False)
    trusted = certificates.split_bundle(secret(api, "events-broker-certs")["ca.crt"])
    assert trusted == [secret(api, "events-cluster-ca")["ca.crt"],
                       secret(api, "events-clients-ca")["ca.crt"]]


# ------------------------------------------------------------------------------ TLS users
def test_a_tls_user_is_the_certificate_subject_principal() -> None:
    spec = UserSpec.parse({"broker": "events", "authentication": {"type": "tls"}}, "alice")
    assert (spec.tls, spec.mechanism, spec.principal, spec.kafka_user) == (
        True, None, "User:CN=alice", "CN=alice")
    scram = UserSpec.parse({"broker": "events", "authentication": {}}, "bob")
    assert (scram.tls, scram.principal) == (False, "User:bob")


def test_a_user_certificate_is_issued_once_and_renewed_near_its_end() -> None:
    clients, trust = ca("clients"), ca("cluster").cert
    certs = operator_made().certificates
    data = tls_users.plan_certificate({}, clients, trust, "alice", NOW, certs)
    assert data is not None and data["ca.crt"] == trust
    assert certificates.issued_by(data["user.crt"], clients.cert)
    assert certificates.subject_of(data["user.crt"]) == "CN=alice"
    assert tls_users.plan_certificate(data, clients, trust, "alice", NOW, certs) is None
    renewed = tls_users.plan_certificate(data, clients, trust, "alice", NOW + 340 * DAY, certs)
    assert renewed is not None and renewed["user.crt"] != data["user.crt"]
    other = tls_users.plan_certificate(data, ca("new clients"), trust, "alice", NOW, certs)
    assert other is not None and other["user.crt"] != data["user.crt"]


def test_the_entrypoint_takes_its_own_pods_certificate(tmp_path: Any) -> None:
    """Run by ``sh``: with STRATA_TLS_PER_POD the keystore is ``<HOSTNAME>.crt`` + ``.key``."""
    spec = operator_made()
    script = tmp_path / "entrypoint.sh"
    script.write_text(builders.build_config_map(NAMES, spec)["data"]["entrypoint.sh"])
    tls = tmp_path / "tls"
    tls.mkdir()
    for name in ("events-0", "events-1", "tls"):
        (tls / f"{name}.crt").write_text(f"CERT {name}\n")
        (tls / f"{name}.key").write_text(f"KEY {name}\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "strata").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "strata").chmod(0o755)
    keystore = tmp_path / "keystore.pem"
    container = builders.build_pod_template(NAMES, spec)["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOSTNAME": "events-1",
            "STRATA_CONFIG": str(tmp_path / "server.properties"), "STRATA_TLS_DIR": str(tls),
            "STRATA_KEYSTORE": str(keystore), "STRATA_PODINFO": str(tmp_path)}
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert keystore.read_text() == "CERT events-1\nKEY events-1\n"
