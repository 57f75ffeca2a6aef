"""A Broker's SCRAM ``users``: the spec and its admission, ``scram_users.plan`` (what to upsert and
delete), and ``broker.sync_users`` (the pass over Secrets, the cluster and ``status.users``)
with Secrets in a dict and a cluster that records what it is asked."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import pytest

from strata.operator import crds, scram_users
from strata.operator.broker import sync_users
from strata.operator.kafka import KafkaOperationError
from strata.operator.model import BrokerNames, BrokerSpec, ScramUserSpec, SecretKeyRef, SpecError
from strata.operator.scram_users import UserSecret

from .test_operator_crds import admitted, broker, validate

NAMES = BrokerNames("events", "kafka")
CAROL = {"name": "carol", "passwordSecret": {"name": "carol-pw"}}
DAVE = {"name": "dave", "mechanism": "SCRAM-SHA-256",
        "passwordSecret": {"name": "shared", "key": "dave"}}


def spec(*users: dict[str, Any], **more: Any) -> BrokerSpec:
    return BrokerSpec.parse({"metadata": {"managed": True}, "users": list(users), **more})


# ------------------------------------------------------------------------------ spec
def test_users_parse_with_defaults() -> None:
    assert spec(CAROL, DAVE).users == (
        ScramUserSpec("carol", SecretKeyRef("carol-pw", "password"), "SCRAM-SHA-512"),
        ScramUserSpec("dave", SecretKeyRef("shared", "dave"), "SCRAM-SHA-256"))
    assert BrokerSpec.parse({"metadata": {"managed": True}}).users == ()
    # One user may hold both mechanisms.
    both = spec(CAROL, {**CAROL, "mechanism": "SCRAM-SHA-256"})
    assert [u.key for u in both.users] == [("carol", "SCRAM-SHA-512"),
                                           ("carol", "SCRAM-SHA-256")]


@pytest.mark.parametrize(("users", "message"), [
    ([CAROL, CAROL], "listed twice"),
    ([{"passwordSecret": {"name": "x"}}], "name is required"),
    ([{"name": "carol"}], "passwordSecret.name is required"),
    ([{**CAROL, "mechanism": "PLAIN"}], "mechanism must be one of"),
])
def test_invalid_users_are_refused(users: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spec(*users)


def test_the_inter_broker_user_is_not_a_listed_user() -> None:
    secured = {"listeners": {"scram": {"port": 9093,
                                       "authentication": {"type": "scram-sha-512"}}},
               "interBroker": {"listener": "scram", "username": "carol",
                               "passwordSecret": {"name": "b"}}}
    with pytest.raises(SpecError, match="inter-broker user"):
        spec(CAROL, **secured)
    cr = broker(users=[CAROL], **secured)
    validate(cr)
    assert admitted(crds.BROKER_CRD, cr, None) == [
        "users may not list the inter-broker user (interBroker.username)"]
    fine = broker(users=[CAROL, DAVE])
    validate(fine)
    assert admitted(crds.BROKER_CRD, fine, None) == []


def test_users_schema_is_a_list_map_with_defaults_the_model_shares() -> None:
    users = crds.BROKER_SPEC["properties"]["users"]
    assert users["x-kubernetes-list-map-keys"] == ["name", "mechanism"]
    item = users["items"]["properties"]
    # A list-map key must be required or defaulted (the API server refuses the CRD otherwise).
    assert item["mechanism"]["default"] == ScramUserSpec("u", SecretKeyRef("s")).mechanism
    assert item["passwordSecret"]["properties"]["key"]["default"] == SecretKeyRef("s").key
    with pytest.raises(Exception, match="is not one of"):
        validate(broker(users=[{**CAROL, "mechanism": "SCRAM-SHA-1"}]))


# ------------------------------------------------------------------------------ plan
CAROL_SPEC = ScramUserSpec("carol", SecretKeyRef("carol-pw"))
DAVE_SPEC = ScramUserSpec("dave", SecretKeyRef("shared", "dave"), "SCRAM-SHA-256")


def entry(user: ScramUserSpec | tuple[str, str], version: str | None) -> dict[str, Any]:
    key = user.key if isinstance(user, ScramUserSpec) else user
    out: dict[str, Any] = {"name": key[0], "mechanism": key[1], "conditions": []}
    if version is not None:
        out["secretVersion"] = version
    return out


def test_plan_upserts_new_rotated_and_drifted_users_only() -> None:
    secrets = {CAROL_SPEC.key: UserSecret("pw", "7"), DAVE_SPEC.key: UserSecret("pw2", "3")}
    existing = {"carol": frozenset({"SCRAM-SHA-512"}), "dave": frozenset({"SCRAM-SHA-256"})}
    new = scram_users.plan([CAROL_SPEC, DAVE_SPEC], secrets, [], existing)
    assert [(u.user.name, u.password, u.secret_version) for u in new.upserts] == [
        ("carol", "pw", "7"), ("dave", "pw2", "3")]
    settled = [entry(CAROL_SPEC, "7"), entry(DAVE_SPEC, "3")]
    nothing = scram_users.plan([CAROL_SPEC, DAVE_SPEC], secrets, settled, existing)
    assert (nothing.upserts, nothing.deletions) == ((), ())
    assert nothing.up_to_date == (CAROL_SPEC.key, DAVE_SPEC.key)
    rotated = {**secrets, CAROL_SPEC.key: UserSecret("new", "8")}
    assert [u.user.name for u in scram_users.plan([CAROL_SPEC, DAVE_SPEC], rotated, settled,
                                                  existing).upserts] == ["carol"]
    drifted = {"carol": frozenset({"SCRAM-SHA-256"}), "dave": frozenset({"SCRAM-SHA-256"})}
    assert [u.user.name for u in scram_users.plan([CAROL_SPEC, DAVE_SPEC], secrets, settled,
                                                  drifted).upserts] == ["carol"]
    unversioned = {**secrets, CAROL_SPEC.key: UserSecret("pw", "")}
    assert [u.user.name for u in scram_users.plan(
        [CAROL_SPEC, DAVE_SPEC], unversioned, [entry(CAROL_SPEC, ""), entry(DAVE_SPEC, "3")],
        existing).upserts] == ["carol"]


def test_plan_skips_users_without_a_password_and_deletes_only_its_own() -> None:
    secrets = {CAROL_SPEC.key: UserSecret(None, problem="Secret carol-pw not found")}
    previous = [entry(CAROL_SPEC, "7"), entry(DAVE_SPEC, "3"), entry(("erin", "SCRAM-SHA-512"),
                                                                     None)]
    decided = scram_users.plan([CAROL_SPEC], secrets, previous, {})
    assert decided.upserts == () and decided.up_to_date == ()
    # dave was applied by the operator: deleted; erin never was (its Secret never worked).
    assert decided.deletions == (DAVE_SPEC.key,)
    # dave left the list to become the inter-broker user: handed over, not deleted.
    assert scram_users.plan([CAROL_SPEC], secrets, previous, {}, "dave").deletions == ()


def test_read_secret_problems() -> None:
    encoded = {"password": "pw"}
    ok = scram_users.read_secret({"metadata": {"resourceVersion": "12"}}, CAROL_SPEC, encoded)
    assert ok == UserSecret("pw", "12")
    assert "not found" in scram_users.read_secret(None, CAROL_SPEC, None).problem
    empty = scram_users.read_secret({"metadata": {}}, CAROL_SPEC, {"password": ""})
    assert empty.password is None and "'password'" in empty.problem


# ------------------------------------------------------------------------------ sync_users
class Secrets:
    """``Kube.read`` for Secrets only, from a dict of name -> (resourceVersion, data)."""

    def __init__(self, **secrets: tuple[str, dict[str, str]]) -> None:
        self.secrets = secrets

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert (kind, namespace) == ("Secret", "kafka")
        if name not in self.secrets:
            return None
        version, data = self.secrets[name]
        return {"metadata": {"name": name, "resourceVersion": version},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


class Users:
    """The SCRAM part of the ``kafka.Cluster`` protocol, in memory; ``fail`` makes calls for
    that user raise, ``unreachable`` makes every call raise."""

    def __init__(self) -> None:
        self.credentials: dict[tuple[str, str], str] = {}
        self.calls: list[tuple[str, ...]] = []
        self.fail: set[str] = set()
        self.unreachable = False

    def _check(self, user: str) -> None:
        if self.unreachable:
            raise KafkaOperationError("DescribeUserScramCredentials: no answer in 1s")
        if user in self.fail:
            raise KafkaOperationError(f"AlterUserScramCredentials {user!r}: refused",
                                      "UNACCEPTABLE_CREDENTIAL")

    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]:
        self._check("")
        return {u: frozenset(m for (n, m) in self.credentials if n == u) for u in users}

    def upsert_scram_credential(self, user: str, mechanism: str, password: str,
                                iterations: int) -> None:
        self._check(user)
        self.calls.append(("upsert", user, mechanism))
        self.credentials[(user, mechanism)] = password

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._check(user)
        self.calls.append(("delete", user, mechanism))
        self.credentials.pop((user, mechanism), None)


def ready(entries: list[dict[str, Any]]) -> dict[str, tuple[str, str, str | None]]:
    return {e["name"]: (e["conditions"][0]["status"], e["conditions"][0]["reason"],
                        e.get("secretVersion")) for e in entries}


def test_sync_users_creates_rotates_repairs_and_deletes() -> None:
    kube = Secrets(**{"carol-pw": ("1", {"password": "c1"}),
                      "shared": ("5", {"dave": "d1"})})
    cluster = Users()
    both = spec(CAROL, DAVE)

    def sync(current: BrokerSpec, previous: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = sync_users(kube, NAMES, current, lambda: cluster, previous, 4)
        assert out is not None
        return out

    status = sync(both, [])
    assert ready(status) == {"carol": ("True", "CredentialApplied", "1"),
                             "dave": ("True", "CredentialApplied", "5")}
    assert cluster.credentials == {("carol", "SCRAM-SHA-512"): "c1",
                                   ("dave", "SCRAM-SHA-256"): "d1"}
    assert status[0]["conditions"][0]["observedGeneration"] == 4
    cluster.calls.clear()
    assert sync(both, status) == status and cluster.calls == []  # nothing to do: no writes

    kube.secrets["carol-pw"] = ("2", {"password": "c2"})  # rotated
    del cluster.credentials[("dave", "SCRAM-SHA-256")]  # deleted behind the operator's back
    status = sync(both, status)
    assert sorted(cluster.calls) == [("upsert", "carol", "SCRAM-SHA-512"),
                                     ("upsert", "dave", "SCRAM-SHA-256")]
    assert cluster.credentials[("carol", "SCRAM-SHA-512")] == "c2"
    assert ready(status)["carol"] == ("True", "CredentialApplied", "2")

    cluster.calls.clear()
    cluster.credentials[("erin", "SCRAM-SHA-512")] = "made by hand"
    status = sync(spec(CAROL), status)  # dave removed from the list
    assert cluster.calls == [("delete", "dave", "SCRAM-SHA-256")]
    assert list(ready(status)) == ["carol"]
    assert ("erin", "SCRAM-SHA-512") in cluster.credentials
    assert sync_users(kube, NAMES, spec(), lambda: cluster, [], 4) is None


def test_sync_users_reports_problems_and_keeps_what_it_owns() -> None:
    kube = Secrets(**{"carol-pw": ("1", {"password": "c1"})})
    cluster = Users()
    status = sync_users(kube, NAMES, spec(CAROL, DAVE), lambda: cluster, [], 1)
    assert status is not None
    assert ready(status) == {"carol": ("True", "CredentialApplied", "1"),
                             "dave": ("False", "SecretNotFound", None)}
    assert "Secret shared not found" in status[1]["conditions"][0]["message"]

    cluster.unreachable = True
    kube.secrets["carol-pw"] = ("2", {"password": "c2"})
    down = sync_users(kube, NAMES, spec(DAVE), lambda: cluster, status, 1)
    assert down is not None
    # carol left the list but cannot be deleted yet: still reported, still ours.
    assert ready(down) == {"dave": ("False", "SecretNotFound", None),
                           "carol": ("False", "DeletionPending", "1")}
    cluster.unreachable = False
    cluster.fail = {"carol"}
    still = sync_users(kube, NAMES, spec(DAVE), lambda: cluster, down, 1)
    assert still is not None and ready(still)["carol"] == ("False", "DeletionPending", "1")
    cluster.fail = set()
    gone = sync_users(kube, NAMES, spec(DAVE), lambda: cluster, still, 1)
    assert gone is not None and list(ready(gone)) == ["dave"]
    assert cluster.credentials == {}


def test_a_refused_upsert_is_a_kafka_error_and_retried() -> None:
    kube = Secrets(**{"carol-pw": ("1", {"password": "c1"})})
    cluster = Users()
    cluster.fail = {"carol"}
    status = sync_users(kube, NAMES, spec(CAROL), lambda: cluster, [], 1)
    assert status is not None
    assert ready(status) == {"carol": ("False", "KafkaError", None)}
    assert status[0]["conditions"][0]["message"] == "AlterUserScramCredentials 'carol': refused"
    cluster.fail = set()
    again = sync_users(kube, NAMES, spec(CAROL), lambda: cluster, status, 1)
    assert again is not None and ready(again) == {"carol": ("True", "CredentialApplied", "1")}
