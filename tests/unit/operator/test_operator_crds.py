"""The CRDs: the YAML in the chart is what ``strata.operator.crds`` generates; CRs (the chart's
examples, the test's own) validate against the CRD schemas with jsonschema; the CEL rules do
what they say (evaluated with cel-python, with ``self`` and ``oldSelf`` as the API server
binds them); schema defaults agree with ``model``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml

from strata.operator import crds
from strata.operator.model import BrokerSpec, TopicSpec
from strata.operator.volumes import parse_quantity

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "charts" / "strata" / "crds"
EXAMPLES = ROOT / "charts" / "strata" / "examples"


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def json_schema(node: Any) -> Any:
    """The OpenAPI schema as plain JSON Schema: Kubernetes extensions dropped, and
    int-or-string spelled out."""
    if isinstance(node, dict):
        out = {k: json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
        if node.get("x-kubernetes-int-or-string"):
            out["type"] = ["integer", "string"]
        return out
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    return node


def crd_of(cr: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in crds.ALL_CRDS.values() if c["spec"]["names"]["kind"] == cr["kind"])


def validate(cr: dict[str, Any]) -> None:
    jsonschema.validate(cr, json_schema(schema_of(crd_of(cr))))


def cel_rules(schema: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                 dict[str, Any]]]:
    found = [(path, rule) for rule in schema.get("x-kubernetes-validations", ())]
    for name, child in (schema.get("properties") or {}).items():
        found += cel_rules(child, (*path, name))
    return found


def _quantity(value: Any) -> celpy.celtypes.IntType:
    return celpy.celtypes.IntType(parse_quantity(str(value)))


def _is_less_than(a: Any, b: Any) -> celpy.celtypes.BoolType:
    return celpy.celtypes.BoolType(a < b)


# Kubernetes' CEL quantity library, as far as our rules use it (sizes in bytes).
K8S_FUNCTIONS = {"quantity": _quantity, "isLessThan": _is_less_than}


def admitted(crd: dict[str, Any], new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """Messages of the CEL rules that reject ``new`` (an update from ``old`` when given).

    Like the API server: a rule runs only where its field is present, and a transition rule
    (one naming ``oldSelf``) only on updates where the old object had the field too.
    """
    env = celpy.Environment()
    failed = []
    for path, rule in cel_rules(schema_of(crd)):
        node_new: Any = new
        node_old: Any = old
        for key in path:
            node_new = node_new.get(key) if isinstance(node_new, dict) else None
            node_old = node_old.get(key) if isinstance(node_old, dict) else None
        transition = "oldSelf" in rule["rule"]
        if node_new is None or (transition and node_old is None):
            continue
        activation = {"self": celpy.json_to_cel(node_new)}
        if transition:
            activation["oldSelf"] = celpy.json_to_cel(node_old)
        program = env.program(env.compile(rule["rule"]), functions=K8S_FUNCTIONS)
        if not bool(program.evaluate(activation)):
            failed.append(rule["message"])
    return failed


def topic(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Topic", "metadata": {"name": "t"},
            "spec": {"broker": "events", "partitions": 3, **spec}}


def broker(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Broker", "metadata": {"name": "b"},
            "spec": {"metadata": {"managed": True}, **spec}}


@pytest.mark.parametrize("plural", sorted(crds.ALL_CRDS))
def test_committed_crd_yaml_equals_the_generated(plural: str) -> None:
    committed = (CRD_DIR / crds.file_name(plural)).read_text(encoding="utf-8")
    assert committed == crds.render(crds.ALL_CRDS[plural]), (
        "charts/strata/crds is stale: run `python -m strata.operator.crds charts/strata/crds`")


def test_crds_declare_status_scale_printer_columns_and_short_names() -> None:
    broker_version = crds.BROKER_CRD["spec"]["versions"][0]
    assert broker_version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    assert "status" in broker_version["subresources"]
    assert [c["name"] for c in broker_version["additionalPrinterColumns"]] == [
        "Replicas", "Ready", "Status", "Bootstrap", "Rebalance", "Age"]
    assert crds.BROKER_CRD["spec"]["names"]["shortNames"] == ["sb"]
    assert crds.TOPIC_CRD["spec"]["names"]["shortNames"] == ["st"]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_chart_examples_are_valid_and_admitted(path: Path) -> None:
    cr = yaml.safe_load(path.read_text(encoding="utf-8"))
    validate(cr)
    assert admitted(crd_of(cr), cr, None) == []


def test_invalid_crs_fail_the_schema() -> None:
    for bad in (topic(partitions=0), topic(partitions="3"), topic(topicName="no spaces"),
                broker(replicas=-1), broker(storage={"size": 5})):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)
    missing_broker = topic()
    del missing_broker["spec"]["broker"]
    with pytest.raises(jsonschema.ValidationError):
        validate(missing_broker)


def test_cel_rejects_a_partition_decrease_but_not_an_increase() -> None:
    assert admitted(crds.TOPIC_CRD, topic(partitions=2), topic(partitions=3)) == [
        "partitions cannot be decreased"]
    assert admitted(crds.TOPIC_CRD, topic(partitions=4), topic(partitions=3)) == []


def test_cel_rejects_a_topic_name_or_broker_change() -> None:
    assert admitted(crds.TOPIC_CRD, topic(topicName="b"), topic(topicName="a")) == [
        "topicName cannot be changed"]
    assert admitted(crds.TOPIC_CRD, topic(topicName="a"), topic()) == [
        "topicName cannot be changed"]
    assert admitted(crds.TOPIC_CRD, topic(broker="other"), topic()) == [
        "broker cannot be changed"]
    assert admitted(crds.TOPIC_CRD, topic(config={"retention.ms": 1}), topic()) == []


def test_cel_rejects_operator_owned_config_and_ambiguous_metadata() -> None:
    assert admitted(crds.BROKER_CRD, broker(config={"node.id": 3}), None) != []
    assert admitted(crds.BROKER_CRD, broker(config={"num.partitions": 3}), None) == []
    both = broker(metadata={"managed": True, "etcd": {"endpoints": ["e:2379"]}})
    neither = broker(metadata={})
    assert admitted(crds.BROKER_CRD, both, None) == [
        "set either metadata.etcd.endpoints or metadata.managed: true"]
    assert admitted(crds.BROKER_CRD, neither, None) == [
        "set either metadata.etcd.endpoints or metadata.managed: true"]


def test_schema_defaults_agree_with_the_models() -> None:
    spec = crds.BROKER_SPEC["properties"]
    defaults = BrokerSpec()
    assert spec["replicas"]["default"] == defaults.replicas
    assert spec["image"]["default"] == defaults.image
    assert spec["storage"]["properties"]["size"]["default"] == defaults.storage.size
    assert spec["admin"]["properties"]["replicas"]["default"] == defaults.admin_replicas
    assert crds.TOPIC_SPEC["properties"]["partitions"]["default"] == TopicSpec("b", "t").partitions


@pytest.mark.parametrize("plural", sorted(set(crds.ALL_CRDS) - {"rebalances"}))
def test_v1beta1_is_stored_and_v1alpha1_still_served_with_the_same_schema(plural: str) -> None:
    spec = crds.ALL_CRDS[plural]["spec"]
    versions = {v["name"]: v for v in spec["versions"]}
    assert list(versions) == ["v1beta1", "v1alpha1"]
    assert [v["name"] for v in spec["versions"] if v["storage"]] == ["v1beta1"]
    assert all(v["served"] for v in spec["versions"])
    assert versions["v1alpha1"]["deprecated"] is True
    assert "use strata.dev/v1beta1" in versions["v1alpha1"]["deprecationWarning"]
    # Identical schemas, columns and subresources: conversion rewrites apiVersion alone.
    for key in ("schema", "subresources", "additionalPrinterColumns"):
        assert versions["v1alpha1"][key] == versions["v1beta1"][key]
    assert spec["conversion"] == {"strategy": "None"}
    # A v1alpha1 object validates as it did.
    old = {**broker(), "apiVersion": "strata.dev/v1alpha1"}
    validate(old)
