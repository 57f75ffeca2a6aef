"""The ``User`` resource: its spec and admission (schema, CEL), ``user_sync.decide`` (what to
change in Kafka), the generated Secret, and ``user.reconcile`` / ``user.delete`` against an
in-memory API server and a cluster that records what it is asked."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import pytest

from strata.operator import user, user_sync
from strata.operator.kafka import KafkaOperationError, acl_binding, acl_rule
from strata.operator.model import SecretKeyRef, SpecError
from strata.operator.user_crd import USER_CRD
from strata.operator.user_spec import AclRule, UserSpec

from .test_operator_crds import admitted, validate

READ_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "READ")
WRITE_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "WRITE")


def user_cr(name: str = "alice", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "User",
            "metadata": {"name": name, "namespace": "apps", "uid": uuid.uuid4().hex,
                         "generation": 1},
            "spec": {"broker": "events", **spec}}


ACLS = {"type": "simple", "acls": [
    {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Write"]},
    {"resource": {"type": "group", "name": "app", "patternType": "prefixed"},
     "operations": ["Read"], "type": "deny", "host": "10.0.0.1"},
    {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]}]}


# ------------------------------------------------------------------------------ spec
def test_the_spec_parses_with_kafka_names_and_defaults() -> None:
    spec = UserSpec.parse(user_cr(authentication={}, authorization=ACLS,
                                  quotas={"producerByteRate": 1024,
                                          "requestPercentage": 12.5})["spec"], "alice")
    assert (spec.user_name, spec.principal, spec.mechanism, spec.password) == (
        "alice", "User:alice", "SCRAM-SHA-512", None)
    assert spec.acls == {
        READ_ORDERS, WRITE_ORDERS,
        AclRule("GROUP", "app", "PREFIXED", "READ", "10.0.0.1", "DENY"),
        AclRule("CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE")}
    assert spec.quotas == {"producer_byte_rate": 1024.0, "request_percentage": 12.5}
    named = UserSpec.parse({"broker": "b", "userName": "bob", "authentication": {
        "type": "scram-sha-256", "passwordSecret": {"name": "pw"}}}, "ignored")
    assert (named.user_name, named.mechanism, named.password) == (
        "bob", "SCRAM-SHA-256", SecretKeyRef("pw", "password"))
    assert UserSpec.parse({"broker": "b"}, "x").mechanism is None  # ACLs and quotas only


@pytest.mark.parametrize(("spec", "message"), [
    ({}, "broker"),
    ({"broker": "b", "authentication": {"type": "plain"}}, "authentication.type"),
    ({"broker": "b", "authorization": {"acls": [{"resource": {"type": "topic"},
                                                 "operations": ["Read"]}]}}, "resource.name"),
    ({"broker": "b", "authorization": {"acls": [{"resource": {"type": "topic", "name": "t"},
                                                 "operations": ["Fly"]}]}}, "'Fly'"),
    ({"broker": "b", "authorization": {"acls": [{"resource": {"type": "topic", "name": "t"},
                                                 "operations": []}]}}, "at least one"),
    ({"broker": "b", "quotas": {"producerByteRate": -1}}, "producerByteRate"),
])
def test_invalid_specs_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        UserSpec.parse(spec, "x")


def test_admission_schema_and_cel() -> None:
    validate(user_cr(authentication={"type": "scram-sha-256"}, authorization=ACLS,
                     quotas={"consumerByteRate": 10}))
    for bad in ({"authentication": {"type": "plain"}}, {"quotas": {"producerByteRate": -1}},
                {"authorization": {"acls": [{"resource": {"type": "topic", "name": "t"},
                                             "operations": ["Fly"]}]}}):
        with pytest.raises(jsonschema.ValidationError):
            validate(user_cr(**bad))
    resource = USER_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"]["authorization"]["properties"]["acls"]["items"]["properties"][
        "resource"]
    alone = {"spec": {"versions": [{"schema": {"openAPIV3Schema": resource}}]}}
    assert admitted(alone, {"type": "topic"}, None) == [
        "a topic, group or transactionalId rule needs resource.name"]
    assert admitted(alone, {"type": "cluster"}, None) == []
    assert admitted(USER_CRD, user_cr(userName="b"), user_cr(userName="a")) == [
        "userName cannot be changed"]
    assert admitted(USER_CRD, {**user_cr(), "spec": {"broker": "other"}}, user_cr()) == [
        "broker cannot be changed"]


def test_acl_rules_survive_confluent_kafkas_bindings() -> None:
    for rule in (READ_ORDERS, AclRule("CLUSTER", "kafka-cluster", "LITERAL", "ALTER"),
                 AclRule("TRANSACTIONAL_ID", "tx", "PREFIXED", "WRITE", "1.2.3.4", "DENY")):
        assert acl_rule(acl_binding("User:alice", rule)) == rule


# ------------------------------------------------------------------------------ decide
def spec_of(**spec: Any) -> UserSpec:
    return UserSpec.parse(user_cr(**spec)["spec"], "alice")


def test_decide_creates_what_is_missing_and_deletes_what_is_not_listed() -> None:
    spec = spec_of(authentication={}, authorization={"acls": [
        {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Write"]}]},
        quotas={"producerByteRate": 100})
    stray = AclRule("TOPIC", "secret", "LITERAL", "READ")
    changes = user_sync.decide(spec, user_sync.Observed(
        frozenset(), frozenset({READ_ORDERS, stray}),
        {"producer_byte_rate": 50.0, "consumer_byte_rate": 10.0}), "7", None, None)
    assert changes.upsert == "SCRAM-SHA-512"
    assert changes.create_acls == (WRITE_ORDERS,)
    assert changes.delete_acls == (stray,)
    assert changes.set_quotas == {"producer_byte_rate": 100.0}
    assert changes.remove_quotas == ("consumer_byte_rate",)
    assert "1 ACLs created" in changes.summary()


def test_decide_is_empty_once_applied_and_repairs_drift() -> None:
    spec = spec_of(authentication={}, quotas={"producerByteRate": 100})
    applied = user_sync.Observed(frozenset({"SCRAM-SHA-512"}), frozenset(),
                                 {"producer_byte_rate": 100.0})
    assert user_sync.decide(spec, applied, "7", "7", "SCRAM-SHA-512").empty
    rotated = user_sync.decide(spec, applied, "8", "7", "SCRAM-SHA-512")
    assert rotated.upsert == "SCRAM-SHA-512"
    deleted_by_hand = user_sync.Observed(frozenset(), frozenset(), applied.quotas)
    assert user_sync.decide(spec, deleted_by_hand, "7", "7", "SCRAM-SHA-512").upsert
    # A mechanism change sets the new credential and deletes the old one.
    other = spec_of(authentication={"type": "scram-sha-256"}, quotas={"producerByteRate": 100})
    switched = user_sync.decide(other, applied, "7", "7", "SCRAM-SHA-512")
    assert (switched.upsert, switched.delete_mechanisms) == ("SCRAM-SHA-256",
                                                             ("SCRAM-SHA-512",))
    # No password to apply (Secret missing): nothing upserted.
    assert user_sync.decide(spec, deleted_by_hand, None, "7", "SCRAM-SHA-512").upsert is None


def test_the_generated_secret_is_owned_by_the_user_and_holds_a_jaas_line() -> None:
    body = user_cr()
    secret = user_sync.generated_secret(body, spec_of(authentication={}), 'p"w')
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["password"] == 'p"w'
    assert data["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="p\\"w";')
    assert user_sync.owned_by(secret, body)
    assert not user_sync.owned_by(secret, user_cr())


# ------------------------------------------------------------------------------ reconcile
class Api:
    """The API server calls ``user.reconcile`` makes, in memory."""

    def __init__(self, body: dict[str, Any], broker: bool = True) -> None:
        self.body = body
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        if broker:
            self.objects[("Broker", "events")] = {
                "metadata": {"name": "events", "namespace": "apps"},
                "spec": {"metadata": {"managed": True}}}
        self.events: list[dict[str, Any]] = []
        self.versions = iter(range(100, 1000))
        self.other_users: list[dict[str, Any]] = []

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        assert kind == "User"
        return [self.body, *self.other_users]

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, name))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Event":
            self.events.append(obj)
            return obj
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return obj

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        return self.objects.pop((kind, name), None) is not None

    def patch_status(self, kind: str, namespace: str, name: str,
                     status: dict[str, Any]) -> dict[str, Any]:
        self.body["status"] = status
        return self.body


class Cluster:
    """A cluster's users, ACLs and quotas, changed as asked."""

    def __init__(self, fail: str = "") -> None:
        self.credentials: dict[str, dict[str, str]] = {}
        self.acl_store: dict[str, set[AclRule]] = {}
        self.quotas: dict[str, dict[str, float]] = {}
        self.fail = fail
        self.calls: list[str] = []

    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]:
        if self.fail:
            raise KafkaOperationError(self.fail)
        return {u: frozenset(self.credentials.get(u, {})) for u in users}

    def upsert_scram_credential(self, name: str, mechanism: str, password: str,
                                iterations: int) -> None:
        self.calls.append(f"upsert {name} {mechanism}")
        self.credentials.setdefault(name, {})[mechanism] = password

    def delete_scram_credential(self, name: str, mechanism: str) -> None:
        self.calls.append(f"delete {name} {mechanism}")
        self.credentials.get(name, {}).pop(mechanism, None)

    def acls(self, principal: str) -> frozenset[AclRule]:
        return frozenset(self.acl_store.get(principal, set()))

    def create_acls(self, principal: str, rules: Sequence[AclRule]) -> None:
        self.acl_store.setdefault(principal, set()).update(rules)

    def delete_acls(self, principal: str, rules: Sequence[AclRule] | None) -> None:
        if rules is None:
            self.acl_store.pop(principal, None)
        else:
            self.acl_store.setdefault(principal, set()).difference_update(rules)

    def user_quotas(self, name: str) -> dict[str, float]:
        return dict(self.quotas.get(name, {}))

    def alter_user_quotas(self, name: str, set_quotas: Mapping[str, float],
                          remove: Sequence[str]) -> None:
        quotas = self.quotas.setdefault(name, {})
        quotas.update(set_quotas)
        for key in remove:
            quotas.pop(key, None)


def run(api: Api, cluster: Cluster) -> dict[str, Any]:
    status = user.reconcile(api.body, api,  # type: ignore[arg-type]  # the calls it makes
                            cluster_factory=lambda bootstrap, config: cluster,
                            generate=lambda: "generated-pw")
    api.body["status"] = status
    return status


def ready(status: Mapping[str, Any]) -> tuple[str, str]:
    condition = status["conditions"][0]
    return condition["status"], condition["reason"]


def test_a_user_gets_a_generated_password_acls_and_quotas_then_nothing_more() -> None:
    api, cluster = Api(user_cr(authentication={}, authorization=ACLS,
                               quotas={"producerByteRate": 1024})), Cluster()
    status = run(api, cluster)
    assert ready(status) == ("True", "UserReady")
    secret = api.objects[("Secret", "alice")]
    assert base64.b64decode(secret["data"]["password"]).decode() == "generated-pw"
    assert cluster.credentials == {"alice": {"SCRAM-SHA-512": "generated-pw"}}
    assert len(cluster.acl_store["User:alice"]) == 4
    assert cluster.quotas == {"alice": {"producer_byte_rate": 1024.0}}
    assert (status["username"], status["secret"], status["mechanism"],
            status["secretVersion"]) == ("alice", "alice", "SCRAM-SHA-512", "100")
    assert status["observedGeneration"] == 1
    assert [e["reason"] for e in api.events] == ["UserChanged", "UserReady"]
    calls = len(cluster.calls)
    run(api, cluster)
    assert len(cluster.calls) == calls, "a second pass changed something"
    assert len(api.events) == 2


def test_an_acl_removed_from_the_spec_is_deleted_in_kafka() -> None:
    api, cluster = Api(user_cr(authorization=ACLS)), Cluster()
    run(api, cluster)
    api.body["spec"]["authorization"] = {"acls": [ACLS["acls"][0]]}
    run(api, cluster)
    assert cluster.acl_store["User:alice"] == {READ_ORDERS, WRITE_ORDERS}


def test_a_missing_or_foreign_secret_is_a_condition_not_a_credential() -> None:
    api, cluster = Api(user_cr(authentication={"passwordSecret": {"name": "pw"}})), Cluster()
    assert ready(run(api, cluster)) == ("False", "SecretNotFound")
    assert cluster.credentials == {}
    assert api.events[-1]["type"] == "Warning"
    api.objects[("Secret", "pw")] = {"metadata": {"name": "pw", "resourceVersion": "5"},
                                     "data": {"password": base64.b64encode(b"s3").decode()}}
    assert ready(run(api, cluster)) == ("True", "UserReady")
    assert cluster.credentials == {"alice": {"SCRAM-SHA-512": "s3"}}
    foreign = Api(user_cr(authentication={}))
    foreign.objects[("Secret", "alice")] = {"metadata": {"name": "alice"}, "data": {}}
    assert ready(run(foreign, Cluster())) == ("False", "SecretConflict")


def test_no_broker_and_kafka_errors() -> None:
    assert ready(run(Api(user_cr(), broker=False), Cluster())) == ("False", "BrokerNotFound")
    api = Api(user_cr(authentication={}))
    with pytest.raises(Exception, match="unreachable"):
        run(api, Cluster(fail="unreachable"))
    assert ready(api.body["status"]) == ("False", "KafkaError")


def test_a_kafka_user_has_one_owner() -> None:
    older = user_cr("alice-old")
    older["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    older["spec"]["userName"] = "alice"
    body = user_cr(authorization=ACLS)
    body["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    api, cluster = Api(body), Cluster()
    api.other_users.append(older)
    status = run(api, cluster)
    assert ready(status) == ("False", "ResourceConflict")
    assert "User apps/alice-old (the older one)" in status["conditions"][0]["message"]
    assert cluster.acl_store == {} and cluster.calls == []
    cluster.acl_store["User:alice"] = {READ_ORDERS}  # the owner's
    released = user.delete(api.body, api, 0.0,  # type: ignore[arg-type]
                           cluster_factory=lambda b, c: cluster)
    assert released.startswith("released") and cluster.acl_store["User:alice"]
    # A user the Broker lists inline belongs to the Broker.
    inline = Api(user_cr())
    inline.objects[("Broker", "events")]["spec"]["users"] = [
        {"name": "alice", "passwordSecret": {"name": "x"}}]
    assert ready(run(inline, Cluster())) == ("False", "ResourceConflict")


def test_deleting_the_user_removes_credentials_acls_quotas_and_the_secret() -> None:
    api, cluster = Api(user_cr(authentication={}, authorization=ACLS,
                               quotas={"consumerByteRate": 5})), Cluster()
    run(api, cluster)
    cluster.acl_store["User:bob"] = {READ_ORDERS}
    done = user.delete(api.body, api, 0.0,  # type: ignore[arg-type]
                       cluster_factory=lambda bootstrap, config: cluster)
    assert done.startswith("removed user 'alice'")
    assert cluster.credentials == {"alice": {}}
    assert "User:alice" not in cluster.acl_store and "User:bob" in cluster.acl_store
    assert cluster.quotas == {"alice": {}}
    assert ("Secret", "alice") not in api.objects
    gone = Api(user_cr(), broker=False)
    assert user.delete(gone.body, gone, 0.0,  # type: ignore[arg-type]
                       cluster_factory=lambda b, c: cluster).startswith("released")
