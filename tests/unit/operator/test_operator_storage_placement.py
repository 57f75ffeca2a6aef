"""A Broker's day 2 in pure code: storage quantities and the resize plan (raise, wait, refuse
a decrease, at admission too), ``deleteClaim`` on scale-down, the managed etcd's volume,
placement fields and the rack defaults in the pod template (valid Kubernetes), the
per-concern conditions with observedGeneration, and the Event objects."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from strata.operator import broker as broker_reconcile
from strata.operator import builders, conditions, crds, events, rolling
from strata.operator.etcd import build_etcd_stateful_set
from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.volumes import Claim, ResizePlan, parse_quantity, plan_resize

from .test_operator_builders import K8S_VERSION
from .test_operator_crds import admitted, broker

NAMES = BrokerNames("events", "kafka")


def spec(**fields: Any) -> BrokerSpec:
    return BrokerSpec.parse({"metadata": {"managed": True}, **fields})


# ------------------------------------------------------------------------------ storage
@pytest.mark.parametrize(("text", "size"), [
    ("10Gi", 10 * 2**30), ("500M", 500 * 10**6), ("1.5Ti", 3 * 2**39), ("1024", 1024),
    ("1k", 1000), ("0.5Ki", 512)])
def test_quantities(text: str, size: int) -> None:
    assert parse_quantity(text) == size


@pytest.mark.parametrize("bad", ["", "10 Gi", "Gi", "-1Gi", "10GB", "1e3"])
def test_not_quantities(bad: str) -> None:
    with pytest.raises(ValueError, match="not a storage quantity"):
        parse_quantity(bad)


def test_resize_plan_raises_waits_and_refuses_a_decrease() -> None:
    gi = 2**30
    plan = plan_resize([Claim("data-b-0", 10 * gi, 10 * gi), Claim("data-b-1", 20 * gi, 10 * gi),
                        Claim("data-b-2", 20 * gi, 20 * gi)], "20Gi")
    assert plan == ResizePlan(patch=("data-b-0",), waiting=("data-b-0", "data-b-1"))
    assert plan.resizing
    done = plan_resize([Claim("data-b-0", 20 * gi, 21 * gi)], "20Gi")
    assert done == ResizePlan() and not done.resizing
    smaller = plan_resize([Claim("data-b-0", 20 * gi, 20 * gi)], "10Gi")
    assert smaller.larger == ("data-b-0",) and not smaller.patch and not smaller.resizing


def test_admission_refuses_a_storage_decrease_but_not_an_increase() -> None:
    def sized(size: str) -> dict[str, Any]:
        return broker(storage={"size": size})

    assert admitted(crds.BROKER_CRD, sized("1Ti"), sized("100Gi")) == []
    assert admitted(crds.BROKER_CRD, sized("100Gi"), sized("100Gi")) == []
    assert admitted(crds.BROKER_CRD, sized("99Gi"), sized("100Gi")) == [
        "storage.size cannot be decreased: Kubernetes cannot shrink a volume"]
    assert admitted(crds.BROKER_CRD, sized("100G"), sized("100Gi")) != []


def test_delete_claim_also_deletes_a_removed_brokers_claim() -> None:
    keep = builders.build_stateful_set(NAMES, spec())
    drop = builders.build_stateful_set(NAMES, spec(storage={"deleteClaim": True}))
    assert keep["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain", "whenScaled": "Retain"}
    assert drop["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Delete", "whenScaled": "Delete"}


def test_managed_etcd_volume_is_configurable() -> None:
    default = build_etcd_stateful_set(NAMES, spec())["spec"]["volumeClaimTemplates"][0]["spec"]
    assert default["resources"]["requests"]["storage"] == "1Gi"
    assert "storageClassName" not in default
    sized = build_etcd_stateful_set(NAMES, spec(metadata={
        "managed": True, "managedStorage": {"size": "8Gi", "storageClassName": "fast"}}))
    claim = sized["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == "8Gi"
    assert claim["storageClassName"] == "fast"


# ------------------------------------------------------------------------------ placement
PLACED = {
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["kafka"]}]}]}}},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka",
                     "effect": "NoSchedule"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "priorityClassName": "kafka-critical",
}


def pod_spec(broker_spec: BrokerSpec) -> dict[str, Any]:
    sts = builders.build_stateful_set(NAMES, broker_spec)
    kubernetes_validate.validate(sts, K8S_VERSION, strict=True)
    return dict(sts["spec"]["template"]["spec"])


def test_placement_fields_are_rendered_as_given() -> None:
    pod = pod_spec(spec(**PLACED))
    assert pod["affinity"] == PLACED["affinity"]
    assert pod["tolerations"] == PLACED["tolerations"]
    assert pod["nodeSelector"] == PLACED["nodeSelector"]
    assert pod["priorityClassName"] == "kafka-critical"
    assert "topologySpreadConstraints" not in pod  # no rack: no default spread


def test_rack_awareness_spreads_brokers_over_zones_and_nodes_by_default() -> None:
    pod = pod_spec(spec(rack={"topologyKey": "topology.kubernetes.io/zone"}))
    selector = {"matchLabels": builders.selector_labels(NAMES, "broker")}
    assert pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]
    assert pod["affinity"] == {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": selector}}]}}


def test_the_users_placement_wins_over_the_rack_defaults() -> None:
    own_spread = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"a": "b"}}}]
    own_anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}}
    pod = pod_spec(spec(rack={"topologyKey": "rack"}, topologySpreadConstraints=own_spread,
                        affinity=own_anti))
    assert pod["topologySpreadConstraints"] == own_spread
    assert pod["affinity"] == own_anti


def test_no_placement_keeps_the_pod_template_and_its_hash() -> None:
    pod = pod_spec(spec())
    for key in ("affinity", "tolerations", "nodeSelector", "topologySpreadConstraints",
                "priorityClassName"):
        assert key not in pod


# ------------------------------------------------------------------------------ status
def by_type(items: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in items}


def test_one_condition_per_concern_each_with_observed_generation() -> None:
    settled = broker_reconcile.broker_conditions(
        True, "BrokersReady", "3 ready", None, ResizePlan(), spec(), 3, 7, ())
    assert by_type(settled) == {
        "Ready": ("True", "BrokersReady"), "Reconciling": ("False", "Reconciled"),
        "ScaleDownBlocked": ("False", "Reconciled"),
        "StorageResizing": ("False", "VolumesAtSize"),
        "Rebalancing": ("False", "NoReassignment")}
    assert {c["observedGeneration"] for c in settled} == {7}
    moving = rolling.ScaleDecision(3, {("t", 0): (0,)},
                                   "scale-down waits: 1 partitions ... are being reassigned")
    busy = broker_reconcile.broker_conditions(
        False, "ScaleDownBlocked", moving.blocked, moving,
        ResizePlan(patch=("data-events-0",), waiting=("data-events-0",)), spec(), 3, 8, settled,
        moving=True)
    assert by_type(busy) == {
        "Ready": ("False", "ScaleDownBlocked"), "Reconciling": ("True", "ScaleDownBlocked"),
        "ScaleDownBlocked": ("True", "ScaleDownBlocked"),
        "StorageResizing": ("True", "VolumesResizing"),
        "Rebalancing": ("True", "ReassigningPartitions")}
    refused = broker_reconcile.broker_conditions(
        True, "BrokersReady", "", None, ResizePlan(larger=("data-events-0",)), spec(), 3, 9, ())
    assert by_type(refused)["StorageResizing"] == ("False", "StorageDecreaseNotPossible")
    assert "cannot shrink" in refused[3]["message"]


def test_a_transition_time_moves_only_with_the_status() -> None:
    first = conditions.condition("StorageResizing", True, "VolumesResizing", "a", 1, (),
                                 now="2026-01-01T00:00:00Z")
    same = conditions.condition("StorageResizing", True, "VolumesResizing", "b", 2, [first],
                                now="2026-01-02T00:00:00Z")
    flipped = conditions.condition("StorageResizing", False, "VolumesAtSize", "c", 3, [same],
                                   now="2026-01-03T00:00:00Z")
    assert same["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert flipped["lastTransitionTime"] == "2026-01-03T00:00:00Z"


def test_an_event_names_its_object() -> None:
    involved = {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                "metadata": {"name": "events", "namespace": "kafka", "uid": "u"}}
    event = events.build_event(involved, events.WARNING, "StorageDecreaseNotPossible",
                               "x" * 2000, "2026-01-01T00:00:00Z", "abc")
    kubernetes_validate.validate(event, K8S_VERSION, strict=True)
    assert event["metadata"] == {"name": "events.abc", "namespace": "kafka"}
    assert event["involvedObject"] == {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                                       "namespace": "kafka", "name": "events", "uid": "u"}
    assert len(event["message"]) == 1024 and event["type"] == "Warning"
    with pytest.raises(ValueError, match="Normal or Warning"):
        events.build_event(involved, "Error", "X", "", "now", "abc")


# ------------------------------------------------------------------------------ peering
def test_a_replica_stands_by_only_for_a_live_peer_of_higher_priority() -> None:
    import datetime

    from strata.operator.leadership import outranked

    now = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
    live = {"lastseen": "2026-01-01T11:59:30+00:00", "lifetime": 60}
    dead = {"lastseen": "2026-01-01T11:58:00+00:00", "lifetime": 60}
    assert outranked({"a": {**live, "priority": 200}}, 100, now)
    assert not outranked({"a": {**live, "priority": 100}}, 100, now)  # itself
    assert not outranked({"a": {**live, "priority": 50}}, 100, now)
    assert not outranked({"a": {**dead, "priority": 200}}, 100, now)
    assert not outranked(None, 100, now)
    assert not outranked({"a": {"priority": 200, "lastseen": "not a time"}}, 100, now)


def test_a_claim_the_api_server_will_not_expand_is_a_condition_not_a_crash() -> None:
    import json

    from kubernetes.client.exceptions import ApiException

    class Claims:
        def __init__(self) -> None:
            self.events: list[dict[str, Any]] = []

        def list(self, kind: str, namespace: str | None,
                 selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
            return [{"metadata": {"name": "data-events-0"},
                     "spec": {"resources": {"requests": {"storage": "10Gi"}}},
                     "status": {"capacity": {"storage": "10Gi"}}}]

        def patch(self, *args: Any) -> None:
            error = ApiException(status=403, reason="Forbidden")
            error.body = json.dumps({"message": "only dynamically provisioned pvc can be "
                                                "resized and the storageclass that provisions "
                                                "the pvc must support resize"})
            raise error

        def create(self, obj: dict[str, Any]) -> dict[str, Any]:
            self.events.append(obj)
            return obj

    api = Claims()
    broker_spec = spec(storage={"size": "20Gi"})
    plan = broker_reconcile.resize_claims(api, NAMES, broker_spec, 1,  # type: ignore[arg-type]
                                          {"metadata": {"name": "events"}})
    assert "storageclass that provisions the pvc must support resize" in plan.refused
    assert not plan.resizing and api.events == []
    status = by_type(broker_reconcile.broker_conditions(
        True, "BrokersReady", "", None, plan, broker_spec, 1, 3, ()))
    assert status["StorageResizing"] == ("False", "VolumeExpansionRefused")
    assert status["Reconciling"] == ("False", "Reconciled")
