"""The clients CA's staged rotation: the pure stage decisions (``ca_rotation.CLIENTS``,
``trusted_by_age``, ``may_advance``) and ``cluster_ca``'s two steps plus ``tls_users``'
re-issue against the in-memory API server of ``test_operator_certificates`` (with Users)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from strata.operator import ca_rotation, certificates, cluster_ca, tls_users
from strata.operator.kube import Kube
from strata.operator.model import BrokerSpec
from strata.operator.user_spec import UserSpec

from .test_operator_certificates import BODY, NAMES, NOW, Api, ca, secret


class UsersApi(Api):
    """``Api`` plus the namespace's ``User`` list (what ``pending_users`` reads)."""

    def list(self, kind: str, namespace: str | None,
             selector: Any = None) -> list[dict[str, Any]]:
        return [obj for (k, _), obj in self.objects.items() if k == kind]


def mtls_spec() -> BrokerSpec:
    return BrokerSpec.parse({"listeners": {"plaintext": {"port": 9092},
                                           "mtls": {"port": 9094, "tls": True,
                                                    "authentication": {"type": "tls"}}},
                             "metadata": {"etcd": {"endpoints": ["e:2379"]}}}, "events")


def one_pass(api: Api, spec: BrokerSpec, settled: bool,
             force: str | None = None) -> dict[str, Any]:
    annotations = {force: "true"} if force else {}
    body = {**BODY, "metadata": {**BODY["metadata"], "annotations": annotations}}
    kube = cast(Kube, api)
    prepared = cluster_ca.prepare(kube, body, NAMES, spec, 1, now=lambda: NOW)
    status = cluster_ca.finish(kube, body, NAMES, spec, prepared, settled, now=lambda: NOW)
    assert status is not None
    return status


USER = {"apiVersion": "strata.dev/v1beta1", "kind": "User",
        "metadata": {"name": "alice", "namespace": "prod", "uid": "u-alice"},
        "spec": {"broker": "events", "authentication": {"type": "tls"}}}


def reconcile_user(api: Api) -> str:
    """The User reconcile's certificate step; the certificate its Secret then holds."""
    spec = UserSpec.parse(USER["spec"], "alice")
    _, problem = tls_users.ensure_certificate(cast(Kube, api), USER, spec,
                                              {**BODY, "spec": {
                                                  "listeners": {"mtls": {
                                                      "port": 9094, "tls": True,
                                                      "authentication": {"type": "tls"}}},
                                                  "metadata": {"etcd": {
                                                      "endpoints": ["e:2379"]}}}},
                                              now=lambda: NOW)
    assert problem == ""
    return secret(api, "alice")["user.crt"]


# ------------------------------------------------------------------------------ pure
def test_the_clients_ca_bundle_is_the_same_in_stages_one_and_two() -> None:
    made = iter([ca("old clients"), ca("new clients")])
    idle = ca_rotation.initial(lambda: next(made))
    old = idle.data["ca.crt"]
    trust_both = ca_rotation.advance(idle, lambda: next(made))
    new = trust_both.data["next.crt"]
    reissue = ca_rotation.advance(trust_both, lambda: pytest.fail("no new CA now"))
    drop = ca_rotation.advance(reissue, lambda: pytest.fail("no new CA now"))
    assert [s.trusted_by_age for s in (idle, trust_both, reissue, drop)] == [
        [old], [old, new], [old, new], [new]]
    assert trust_both.issuer.cert == old and reissue.issuer.cert == new


def test_a_stage_moves_on_after_its_roll_and_stage_two_after_its_users() -> None:
    made = iter([ca("a"), ca("b")])
    trust_both = ca_rotation.advance(ca_rotation.initial(lambda: next(made)), lambda: next(made))
    reissue = ca_rotation.advance(trust_both, lambda: pytest.fail("no new CA now"))
    assert ca_rotation.may_advance(trust_both, settled=True, changed=False)
    assert not ca_rotation.may_advance(trust_both, settled=False, changed=False)
    assert not ca_rotation.may_advance(trust_both, settled=True, changed=True)
    assert not ca_rotation.may_advance(ca_rotation.CaState(trust_both.data), True, False)
    assert not ca_rotation.may_advance(reissue, True, False, ["alice"])
    assert ca_rotation.may_advance(reissue, True, False, [])
    assert ca_rotation.may_advance(trust_both, True, False, ["alice"])  # stage 2 only


def test_each_ca_kind_has_its_own_annotation_events_and_words() -> None:
    cluster, clients = ca_rotation.CLUSTER, ca_rotation.CLIENTS
    assert cluster.force_annotation == "strata.dev/force-renew-ca"
    assert clients.force_annotation == "strata.dev/force-renew-clients-ca"
    assert (clients.event_reason, clients.complete_reason) == (
        "ClientsCaRotation", "ClientsCaRotationComplete")
    for stage in (*ca_rotation.STAGES, ca_rotation.IDLE):
        assert "clients CA" in ca_rotation.stage_message(stage, clients)
        assert "cluster CA" in ca_rotation.stage_message(stage)


# ------------------------------------------------------------------------------ I/O
def test_clients_ca_rotation_rolls_twice_and_waits_for_the_users_certificates() -> None:
    api, spec = UsersApi(), mtls_spec()
    status = one_pass(api, spec, settled=False)
    assert (status["clientsCaRotation"], status["caRotation"]) == ("", "")
    cluster = secret(api, "events-cluster-ca")["ca.crt"]
    old = secret(api, "events-clients-ca")["ca.crt"]
    api.create(USER)
    first_cert = reconcile_user(api)
    assert certificates.issued_by(first_cert, old)
    api.events.clear()

    def bundle() -> list[str]:
        return certificates.split_bundle(secret(api, "events-broker-certs")["ca.crt"])

    # Stage 1: the brokers trust old + new (the broker Secret changes: a roll); nobody is
    # re-issued, and the cluster CA does not rotate.
    status = one_pass(api, spec, settled=False, force=ca_rotation.CLIENTS.force_annotation)
    assert (status["clientsCaRotation"], status["caRotation"]) == (ca_rotation.TRUST_NEW_CA, "")
    assert api.objects[("Broker", "events")]["metadata"]["annotations"] == {}
    new = secret(api, "events-clients-ca")["next.crt"]
    assert bundle() == [cluster, old, new]
    assert api.objects[("Secret", "events-clients-ca")]["metadata"]["annotations"] == {
        ca_rotation.STAGE_ANNOTATION: ca_rotation.TRUST_NEW_CA}  # a restart resumes here
    assert reconcile_user(api) == first_cert
    assert one_pass(api, spec, settled=False)["clientsCaRotation"] == ca_rotation.TRUST_NEW_CA

    # Stage 2 once rolled: the new CA issues; the brokers' Secret is unchanged (no roll).
    certs_before = api.objects[("Secret", "events-broker-certs")]
    assert one_pass(api, spec, settled=True)["clientsCaRotation"] == \
        ca_rotation.REISSUE_CERTIFICATES
    for _ in range(2):  # alice still holds the old CA's certificate: stage 2 waits
        status = one_pass(api, spec, settled=True)
        assert status["clientsCaRotation"] == ca_rotation.REISSUE_CERTIFICATES
        assert status["clientsCaWaitingFor"] == ["alice"]  # named in the status
    assert api.objects[("Secret", "events-broker-certs")] is certs_before
    assert cluster_ca.pending_users(cast(Kube, api), NAMES, ca_rotation.CaState(
        secret(api, "events-clients-ca"))) == ["alice"]
    second_cert = reconcile_user(api)
    assert certificates.issued_by(second_cert, new) and second_cert != first_cert

    # Stage 3: the old clients CA leaves the bundle (a roll), then idle.
    status = one_pass(api, spec, settled=True)
    assert status["clientsCaRotation"] == ca_rotation.DROP_OLD_CA
    assert status["clientsCaWaitingFor"] == []  # "" / [] when nobody: a merge patch clears it
    assert one_pass(api, spec, settled=True)["clientsCaRotation"] == ca_rotation.DROP_OLD_CA
    assert bundle() == [cluster, new]
    status = one_pass(api, spec, settled=True)
    assert status["clientsCaRotation"] == "" and status["caRotation"] == ""
    assert status["clientsCaNotAfter"] == certificates.not_after(new).isoformat()
    assert set(secret(api, "events-clients-ca")) == {"ca.crt", "ca.key"}
    assert secret(api, "events-cluster-ca")["ca.crt"] == cluster
    assert reconcile_user(api) == second_cert
    assert secret(api, "alice")["ca.crt"] == secret(api, "events-broker-certs")["ca.crt"]
    assert api.events == ["ClientsCaRotation"] * 3 + ["ClientsCaRotationComplete"]


def test_without_a_tls_authenticated_listener_the_clients_annotation_is_only_taken() -> None:
    api = UsersApi()
    spec = BrokerSpec.parse({"listeners": {"tls": {"port": 9093, "tls": True}},
                             "metadata": {"etcd": {"endpoints": ["e:2379"]}}}, "events")
    status = one_pass(api, spec, settled=True, force=ca_rotation.CLIENTS.force_annotation)
    assert status["clientsCaRotation"] == "" and "clientsCaNotAfter" not in status
    assert ("Secret", "events-clients-ca") not in api.objects
    assert api.objects[("Broker", "events")]["metadata"]["annotations"] == {}
