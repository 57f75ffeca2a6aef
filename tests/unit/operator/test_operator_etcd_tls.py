"""The managed etcd's TLS under the operator's cluster CA: the rendered etcd StatefulSet (args,
volumes, probe), the brokers' ``metadata.store`` settings, the ``<broker>-etcd-certs`` Secret
that ``etcd_certs.ensure`` writes (against the in-memory API server of the certificates
tests), and every object still valid Kubernetes."""

from __future__ import annotations

import datetime
from typing import Any, cast

import kubernetes_validate
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from strata.operator import builders, certificates, cluster_ca, etcd_certs, etcd_tls
from strata.operator.etcd import build_etcd_stateful_set
from strata.operator.kube import Kube
from strata.operator.model import BrokerNames, BrokerSpec

from .test_operator_builders import K8S_VERSION, OWNER
from .test_operator_certificates import BODY, Api, secret

NAMES = BrokerNames("events", "prod")
NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)


def managed(*, tls: bool, replicas: int = 3, mtls: bool = False) -> BrokerSpec:
    listener: dict[str, Any] = {"port": 9093, "tls": True}
    if mtls:
        listener["authentication"] = {"type": "tls"}
    listeners = {"tls": listener} if tls else {"plain": {"port": 9092}}
    return BrokerSpec.parse({"listeners": listeners,
                             "metadata": {"managed": True, "managedReplicas": replicas}},
                            "events")


def etcd_container(spec: BrokerSpec,
                   certs: etcd_tls.EtcdCerts = etcd_tls.PLAIN) -> dict[str, Any]:
    sts = build_etcd_stateful_set(NAMES, spec, certs)
    return cast(dict[str, Any], sts["spec"]["template"]["spec"]["containers"][0])


PEER_FLAGS = ("--peer-cert-file=/etc/etcd/tls/server.crt",
              "--peer-key-file=/etc/etcd/tls/server.key", "--peer-client-cert-auth",
              "--peer-trusted-ca-file=/etc/etcd/tls/ca.crt")


def test_with_the_cluster_ca_etcd_serves_tls_and_requires_client_certificates() -> None:
    spec = managed(tls=True)
    assert etcd_tls.enabled(spec)
    sts = build_etcd_stateful_set(NAMES, spec)
    container = etcd_container(spec)
    script = container["command"][-1]
    assert "--listen-client-urls=https://0.0.0.0:2379" in script
    assert "--advertise-client-urls=https://${HOSTNAME}.events-etcd-peers.prod.svc:2379" in script
    for flag in ("--cert-file=/etc/etcd/tls/server.crt", "--key-file=/etc/etcd/tls/server.key",
                 "--client-cert-auth", "--trusted-ca-file=/etc/etcd/tls/ca.crt",
                 "--listen-metrics-urls=http://0.0.0.0:2381"):
        assert f" {flag}" in script
    # an etcd that predates TLS (etcd_certs.ensure decided): its peers stay plain
    assert "--listen-peer-urls=http://" in script
    assert not any(flag in script for flag in PEER_FLAGS)
    assert {"name": "tls", "mountPath": "/etc/etcd/tls", "readOnly": True} in \
        container["volumeMounts"]
    assert sts["spec"]["template"]["spec"]["volumes"] == [
        {"name": "tls", "secret": {"secretName": "events-etcd-certs", "defaultMode": 0o440}}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 2381, "protocol": "TCP"} in container["ports"]


def test_an_etcd_created_with_tls_has_tls_peers_with_peer_certificates_required() -> None:
    spec = managed(tls=True)
    certs = etcd_tls.EtcdCerts("abc", peer_tls=True)
    container = etcd_container(spec, certs)
    script = container["command"][-1]
    peers = "events-etcd-peers.prod.svc:2380"
    assert "--listen-peer-urls=https://0.0.0.0:2380" in script
    assert f"--initial-advertise-peer-urls=https://${{HOSTNAME}}.{peers}" in script
    assert "--initial-cluster=" + ",".join(
        f"events-etcd-{i}=https://events-etcd-{i}.{peers}" for i in range(3)) in script
    assert "http://events-etcd" not in script
    for flag in PEER_FLAGS:
        assert f" {flag}" in script
    assert "--listen-client-urls=https://" in script and " --client-cert-auth" in script
    assert {"name": "tls", "mountPath": "/etc/etcd/tls", "readOnly": True} in \
        container["volumeMounts"]


def test_kept_peer_tls_without_client_tls_mounts_the_secret_and_probes_the_client_port() -> None:
    """The operator's certificates turned off on a peer-TLS etcd (``EtcdPeerTlsKept``)."""
    spec = managed(tls=False)
    sts = build_etcd_stateful_set(NAMES, spec, etcd_tls.EtcdCerts("abc", peer_tls=True))
    container = sts["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][-1]
    assert "--listen-peer-urls=https://" in script and " --peer-client-cert-auth" in script
    assert "--listen-client-urls=http://" in script and " --client-cert-auth" not in script
    assert sts["spec"]["template"]["spec"]["volumes"] == [
        {"name": "tls", "secret": {"secretName": "events-etcd-certs", "defaultMode": 0o440}}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "client"}


def test_brokers_reach_a_tls_etcd_with_their_broker_certificate() -> None:
    spec = managed(tls=True)
    props = builders.broker_properties(NAMES, spec)
    assert props["metadata.store"] == "etcds://" + ",".join(
        f"events-etcd-{i}.events-etcd-peers.prod.svc:2379" for i in range(3))
    assert etcd_tls.BROKER_TLS_DIR == builders.TLS_DIR
    assert props["metadata.store.ssl.cafile"] == f"{builders.TLS_DIR}/ca.crt"
    assert props["metadata.store.ssl.certfile"] == f"{builders.TLS_DIR}/tls.crt"
    assert props["metadata.store.ssl.keyfile"] == f"{builders.TLS_DIR}/tls.key"
    container = builders.build_pod_template(NAMES, spec)["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STRATA_METADATA_STORE_SSL_CERTFILE"] == f"{builders.TLS_DIR}/tls.crt"
    assert {"name": "tls", "mountPath": builders.TLS_DIR, "readOnly": True} in \
        container["volumeMounts"]
    properties = builders.build_config_map(NAMES, spec)["data"]["server.properties"]
    assert "metadata.store=etcds://" in properties
    assert f"metadata.store.ssl.keyfile={builders.TLS_DIR}/tls.key" in properties


def test_without_tls_the_managed_etcd_stays_plain() -> None:
    spec = managed(tls=False)
    assert not etcd_tls.enabled(spec)
    script = etcd_container(spec)["command"][-1]
    assert "https" not in script and "--client-cert-auth" not in script
    assert "volumes" not in build_etcd_stateful_set(NAMES, spec)["spec"]["template"]["spec"]
    props = builders.broker_properties(NAMES, spec)
    assert props["metadata.store"].startswith("etcd://")
    assert not any(k.startswith("metadata.store.ssl.") for k in props)
    # given endpoints (not managed) are the user's etcd: never switched to TLS here
    given = BrokerSpec.parse({"listeners": {"tls": {"port": 9093, "tls": True}},
                              "metadata": {"etcd": {"endpoints": ["e:2379"]}}}, "events")
    assert builders.metadata_store(NAMES, given) == "etcd://e:2379"


def test_every_object_with_etcd_tls_is_valid_kubernetes() -> None:
    for certs in (etcd_tls.PLAIN, etcd_tls.EtcdCerts("abc", peer_tls=True)):
        for spec in (managed(tls=True), managed(tls=False)):
            digests = builders.SecretDigests(etcd=certs)
            for obj in builders.owned(builders.build_all(NAMES, spec, digests=digests), OWNER):
                kubernetes_validate.validate(obj, K8S_VERSION, strict=True)  # raises if invalid


def decide(api: Api, spec: BrokerSpec, now: datetime.datetime = NOW) -> etcd_tls.EtcdCerts:
    """One pass of ``cluster_ca.prepare`` then ``etcd_certs.ensure``."""
    kube = cast(Kube, api)
    prepared = cluster_ca.prepare(kube, BODY, NAMES, spec, 1, now=lambda: now)
    certs = etcd_certs.ensure(kube, BODY, NAMES, spec, prepared, now=lambda: now)
    if etcd_tls.enabled(spec) or certs.peer_tls:
        assert certs.trust_digest == builders.digest(secret(api, "events-etcd-certs")["ca.crt"])
    else:
        assert certs == etcd_tls.PLAIN
    return certs


def ensure(api: Api, spec: BrokerSpec, now: datetime.datetime = NOW) -> bool:
    """One pass; True when the etcd certificates Secret was written."""
    before = api.objects.get(("Secret", "events-etcd-certs"))
    decide(api, spec, now)
    return api.objects.get(("Secret", "events-etcd-certs")) != before


def etcd_events(api: Api) -> list[str]:
    return [reason for reason in api.events if reason.startswith("Etcd")]


CLAIM = ("PersistentVolumeClaim", "data-events-etcd-0")


def claim_mode(api: Api) -> str | None:
    return cast(str | None, (api.objects[CLAIM]["metadata"].get("annotations") or {}).get(
        etcd_tls.PEER_TLS_ANNOTATION))


def peer_mode(api: Api) -> str:
    annotations = api.objects[("Secret", "events-etcd-certs")]["metadata"]["annotations"]
    return cast(str, annotations[etcd_tls.PEER_TLS_ANNOTATION])


def test_the_etcd_certificates_secret_is_issued_by_the_cluster_ca_only() -> None:
    api = Api()
    assert ensure(api, managed(tls=True, mtls=True))  # a clients CA exists too
    data = secret(api, "events-etcd-certs")
    cluster = secret(api, "events-cluster-ca")["ca.crt"]
    clients = secret(api, "events-clients-ca")["ca.crt"]
    assert certificates.split_bundle(data["ca.crt"]) == certificates.split_bundle(cluster)
    assert clients.strip() not in data["ca.crt"]
    assert certificates.issued_by(data["server.crt"], cluster)
    sans = certificates.sans_of(data["server.crt"])
    for name in ("events-etcd", "events-etcd.prod.svc", "*.events-etcd-peers.prod.svc",
                 "events-etcd-2.events-etcd-peers.prod.svc", "127.0.0.1"):
        assert name in sans
    owner = api.objects[("Secret", "events-etcd-certs")]["metadata"]["ownerReferences"]
    assert owner[0]["uid"] == "u-1"
    # the brokers' client certificate (what they present to etcd) is from the same CA
    broker = secret(api, "events-broker-certs")
    assert certificates.issued_by(broker["tls.crt"], cluster)


def test_the_etcd_certificate_is_kept_then_reissued_for_new_members_or_near_its_end() -> None:
    api = Api()
    assert ensure(api, managed(tls=True))
    first = secret(api, "events-etcd-certs")["server.crt"]
    assert not ensure(api, managed(tls=True))
    assert secret(api, "events-etcd-certs")["server.crt"] == first
    assert ensure(api, managed(tls=True, replicas=5))
    grown = secret(api, "events-etcd-certs")["server.crt"]
    assert "events-etcd-4.events-etcd-peers.prod.svc" in certificates.sans_of(grown)
    assert ensure(api, managed(tls=True, replicas=5), NOW + datetime.timedelta(days=340))
    assert secret(api, "events-etcd-certs")["server.crt"] != grown


def test_nothing_is_written_without_etcd_tls() -> None:
    api = Api()
    assert not ensure(api, managed(tls=False))
    assert ("Secret", "events-etcd-certs") not in api.objects


def test_a_change_of_the_trusted_cas_rolls_the_etcd_members() -> None:
    spec = managed(tls=True)
    plain = build_etcd_stateful_set(NAMES, spec)["spec"]["template"]["metadata"]
    assert "annotations" not in plain
    digests = builders.SecretDigests(etcd=etcd_tls.EtcdCerts("abc"))
    sts = next(o for o in builders.build_all(NAMES, spec, digests=digests)
               if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "events-etcd")
    assert sts["spec"]["template"]["metadata"]["annotations"] == {
        etcd_tls.TRUST_HASH_ANNOTATION: "abc"}
    assert "updateStrategy" not in sts["spec"]  # RollingUpdate: one member at a time


def test_the_etcd_certificate_serves_as_peer_certificate_for_every_member() -> None:
    """A peer connection uses ``server.crt`` as server (the dialled member's name) and as
    client: it names every member's peer DNS name and has both extended key usages."""
    api = Api()
    decide(api, managed(tls=True, replicas=5))
    cert = secret(api, "events-etcd-certs")["server.crt"]
    sans = certificates.sans_of(cert)
    for i in range(5):
        assert f"events-etcd-{i}.events-etcd-peers.prod.svc" in sans
    usages = certificates.load(cert).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}


def test_an_etcd_created_with_tls_gets_tls_peers_for_good() -> None:
    api = Api()
    certs = decide(api, managed(tls=True))
    assert certs.peer_tls and peer_mode(api) == etcd_certs.PEER_TLS
    assert etcd_events(api) == []
    # the etcd now exists: later passes keep the recorded mode, writing nothing, and copy it
    # onto member 0's claim (which outlives the Broker)
    api.objects[("StatefulSet", "events-etcd")] = {"kind": "StatefulSet"}
    api.objects[CLAIM] = {"kind": "PersistentVolumeClaim", "metadata": {}}
    assert not ensure(api, managed(tls=True))
    assert claim_mode(api) == etcd_certs.PEER_TLS
    assert decide(api, managed(tls=True)).peer_tls
    # renewal keeps the mode
    assert ensure(api, managed(tls=True), NOW + datetime.timedelta(days=340))
    assert peer_mode(api) == etcd_certs.PEER_TLS


def test_an_etcd_that_existed_before_tls_keeps_plain_peers_and_says_so_once() -> None:
    for existing in (("StatefulSet", "events-etcd"), CLAIM):
        api = Api()
        api.objects[existing] = {"kind": existing[0], "metadata": {}}
        certs = decide(api, managed(tls=True))
        assert not certs.peer_tls and certs.trust_digest
        assert peer_mode(api) == etcd_certs.PEERS_PLAIN
        assert etcd_events(api) == [etcd_tls.PEERS_PLAIN]
        assert not ensure(api, managed(tls=True))
        assert not decide(api, managed(tls=True)).peer_tls
        assert etcd_events(api) == [etcd_tls.PEERS_PLAIN]  # once
        if existing == CLAIM:
            assert claim_mode(api) == etcd_certs.PEERS_PLAIN


def test_a_secret_from_before_peer_tls_means_plain_peers() -> None:
    """An operator upgrade: the etcd was made with plain peers and its Secret has no mode."""
    api = Api()
    decide(api, managed(tls=True))
    del api.objects[("Secret", "events-etcd-certs")]["metadata"]["annotations"][
        etcd_tls.PEER_TLS_ANNOTATION]
    certs = decide(api, managed(tls=True))
    assert not certs.peer_tls and peer_mode(api) == etcd_certs.PEERS_PLAIN
    assert etcd_events(api) == [etcd_tls.PEERS_PLAIN]


def test_turning_the_operators_certificates_off_keeps_peer_tls() -> None:
    api = Api()
    on = decide(api, managed(tls=True))
    off = decide(api, managed(tls=False))
    assert off == on  # same trust, peers still TLS (a scheme change would split the etcd)
    assert peer_mode(api) == etcd_certs.PEER_TLS_KEPT
    assert etcd_events(api) == [etcd_tls.PEER_TLS_KEPT]
    assert decide(api, managed(tls=False)) == on
    assert etcd_events(api) == [etcd_tls.PEER_TLS_KEPT]  # once
    script = etcd_container(managed(tls=False), off)["command"][-1]
    assert "--listen-client-urls=http://" in script and "--listen-peer-urls=https://" in script
    # on again: renewed by the cluster CA as before, still peer TLS
    assert decide(api, managed(tls=True)).peer_tls
    assert peer_mode(api) == etcd_certs.PEER_TLS
    # a plain etcd stays plain when TLS goes off
    plain = Api()
    plain.objects[("StatefulSet", "events-etcd")] = {"kind": "StatefulSet"}
    decide(plain, managed(tls=True))
    assert decide(plain, managed(tls=False)) == etcd_tls.PLAIN


def test_a_broker_recreated_over_its_etcds_claims_takes_the_mode_of_their_data() -> None:
    """The claims outlive the Broker (and its Secret): the mode copied onto member 0's claim
    decides for the re-created Broker."""
    for mode, peer_tls in ((etcd_certs.PEER_TLS, True), (etcd_certs.PEERS_PLAIN, False)):
        api = Api()
        api.objects[CLAIM] = {"kind": "PersistentVolumeClaim", "metadata": {
            "annotations": {etcd_tls.PEER_TLS_ANNOTATION: mode}}}
        assert decide(api, managed(tls=True)).peer_tls is peer_tls
        assert peer_mode(api) == mode
        assert etcd_events(api) == ([] if peer_tls else [etcd_tls.PEERS_PLAIN])
