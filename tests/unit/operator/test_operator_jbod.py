"""JBOD: ``storage.type: jbod`` volumes as claim templates, mounts and ``log.dirs`` (valid
Kubernetes, read by the real broker's config), resized per volume, ``deleteClaim`` per volume,
the admission rules (no decrease, no type change, never the last volume removed), and the
decisions of adding and removing a volume of a running Broker (``jbod.leaving_volumes``,
``effective_volumes``, ``needs_recreate``, ``plan_moves``, ``claims_of_removed``)."""

from __future__ import annotations

from typing import Any, cast

import celpy
import kubernetes_validate
import pytest

from strata.broker.config import BrokerConfig
from strata.operator import broker as broker_reconcile
from strata.operator import builders, crds, jbod, log_dirs, volume_removal
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec, SpecError

from .test_operator_builders import K8S_VERSION
from .test_operator_crds import K8S_FUNCTIONS, admitted, broker

NAMES = BrokerNames("events", "kafka")
VOLUMES = [{"id": 0, "size": "100Gi", "deleteClaim": True},
           {"id": 1, "size": "200Gi", "storageClassName": "fast"}]


def jbod_spec(volumes: list[dict[str, Any]] = VOLUMES) -> BrokerSpec:
    return BrokerSpec.parse({"metadata": {"managed": True},
                             "storage": {"type": "jbod", "volumes": volumes}})


def test_each_volume_is_a_claim_a_mount_and_a_log_dir() -> None:
    spec = jbod_spec()
    sts = builders.build_stateful_set(NAMES, spec)
    kubernetes_validate.validate(sts, K8S_VERSION, strict=True)
    claims = {c["metadata"]["name"]: c["spec"] for c in sts["spec"]["volumeClaimTemplates"]}
    assert claims["data-0"]["resources"]["requests"]["storage"] == "100Gi"
    assert claims["data-1"]["storageClassName"] == "fast"
    mounts = {m["name"]: m["mountPath"]
              for m in sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["data-0"] == "/var/lib/strata/data-0"
    assert mounts["data-1"] == "/var/lib/strata/data-1"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"
    properties = builders.broker_properties(NAMES, spec)
    assert properties["log.dirs"] == "/var/lib/strata/data-0/data,/var/lib/strata/data-1/data"
    config = BrokerConfig({"log.dirs": properties["log.dirs"]})
    assert [str(p) for p in config.log_dirs] == ["/var/lib/strata/data-0/data",
                                                 "/var/lib/strata/data-1/data"]


def test_a_single_claim_keeps_its_names_and_its_hash() -> None:
    single = BrokerSpec.parse({"metadata": {"managed": True}})
    sts = builders.build_stateful_set(NAMES, single)
    assert [c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]] == ["data"]
    assert builders.broker_properties(NAMES, single)["log.dirs"] == "/var/lib/strata/data"
    every = jbod_spec([{"id": 0, "size": "1Gi", "deleteClaim": True}])
    assert builders.build_stateful_set(NAMES, every)["spec"][
        "persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Delete"


@pytest.mark.parametrize(("storage", "message"), [
    ({"type": "jbod"}, "needs storage.volumes"),
    ({"type": "jbod", "volumes": [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]},
     "unique"),
    ({"type": "jbod", "volumes": [{"id": 0}]}, "size is required"),
    ({"type": "raid"}, "storage.type"),
    ({"type": "jbod", "volumes": [{"id": 0, "size": "1Gi", "remove": True}]},
     "cannot all be removed"),
])
def test_invalid_volumes_are_refused(storage: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        BrokerSpec.parse({"metadata": {"managed": True}, "storage": storage})


def test_admission_refuses_a_volume_decrease_and_a_changed_layout() -> None:
    def cr(volumes: list[dict[str, Any]] | None, kind: str = "jbod") -> dict[str, Any]:
        storage: dict[str, Any] = {"type": kind}
        if volumes is not None:
            storage["volumes"] = volumes
        return broker(storage=storage)

    old = cr([{"id": 0, "size": "100Gi"}, {"id": 1, "size": "100Gi"}])
    grown = cr([{"id": 0, "size": "100Gi"}, {"id": 1, "size": "1Ti"}])
    assert admitted(crds.BROKER_CRD, grown, old) == []
    # The per-volume size rule (in the list-map's items, matched by id as the API server does).
    item = crds.BROKER_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"]["storage"]["properties"]["volumes"]["items"]
    rule = item["properties"]["size"]["x-kubernetes-validations"][0]
    program = celpy.Environment().program(celpy.Environment().compile(rule["rule"]),
                                          functions=K8S_FUNCTIONS)

    def allowed(new: str, old: str) -> bool:
        return bool(program.evaluate({"self": celpy.json_to_cel(new),
                                      "oldSelf": celpy.json_to_cel(old)}))

    assert allowed("1Ti", "100Gi") and allowed("100Gi", "100Gi")
    assert not allowed("99Gi", "100Gi") and rule["message"] == (
        "a volume's size cannot be decreased")
    # Volumes come and go (the StatefulSet is re-created); the last one cannot go.
    assert admitted(crds.BROKER_CRD, cr([{"id": 0, "size": "100Gi"}]), old) == []
    assert admitted(crds.BROKER_CRD, cr([{"id": 0, "size": "100Gi"}, {"id": 1, "size": "1Gi",
                                                                     "remove": True},
                                         {"id": 2, "size": "1Gi"}]), old) == []
    assert admitted(crds.BROKER_CRD, cr([{"id": 0, "size": "100Gi", "remove": True}]), old) == [
        "storage.volumes needs a volume that is not removed (a broker needs a log dir)"]
    assert admitted(crds.BROKER_CRD, broker(storage={"size": "100Gi"}), old) == [
        "storage.type cannot change (a StatefulSet's claims are fixed)"]
    assert admitted(crds.BROKER_CRD, cr(None), None) == [
        "storage.volumes is for storage.type jbod, and jbod needs it"]


class Claims:
    """PersistentVolumeClaims and Pods in memory: what ``resize_claims`` calls."""

    def __init__(self, claims: dict[str, str], pods: list[str]) -> None:
        self.claims = {name: {"metadata": {"name": name, "labels": {}},
                              "spec": {"resources": {"requests": {"storage": size}}},
                              "status": {"capacity": {"storage": size}}}
                       for name, size in claims.items()}
        self.pods = pods
        self.deleted: list[str] = []
        self.owned: list[str] = []

    def list(self, kind: str, namespace: str | None,
             selector: Any = None) -> list[dict[str, Any]]:
        if kind == "Pod":
            return [{"metadata": {"name": p}} for p in self.pods]
        return list(self.claims.values())

    def patch(self, kind: str, namespace: str | None, name: str,
              patch: dict[str, Any]) -> dict[str, Any]:
        if "ownerReferences" in patch.get("metadata", {}):
            self.owned.append(name)
            self.claims[name]["metadata"]["ownerReferences"] = patch["metadata"][
                "ownerReferences"]
        else:
            self.claims[name]["spec"] = patch["spec"]
        return self.claims[name]

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        self.deleted.append(name)
        self.claims.pop(name)
        return True

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj  # Events


BODY = {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
        "metadata": {"name": "events", "namespace": "kafka", "uid": "u-1"}}


def test_each_volume_is_resized_and_delete_claim_applies_per_volume() -> None:
    api = Claims({"data-0-events-0": "100Gi", "data-1-events-0": "100Gi",
                  "data-0-events-1": "100Gi", "data-1-events-1": "200Gi"}, ["events-0"])
    plan = broker_reconcile.resize_claims(cast(Kube, api), NAMES, jbod_spec(), 1, BODY)
    assert plan.patch == ("data-1-events-0",)  # volume 1 grows 100Gi -> 200Gi; 0 is at size
    assert api.claims["data-1-events-0"]["spec"]["resources"]["requests"]["storage"] == "200Gi"
    # Volume 0 says deleteClaim: its claims go with the Broker, and with broker 1 (gone).
    assert api.deleted == ["data-0-events-1"]
    assert sorted(api.owned) == ["data-0-events-0", "data-0-events-1"]
    assert "data-1-events-1" in api.claims  # volume 1 keeps its claims


def test_claims_of_a_broker_still_going_away_are_kept() -> None:
    volumes = jbod_spec().storage.volumes
    doomed = jbod.claims_to_delete(volumes, "events", 1, ["data-0-events-1", "data-1-events-1"])
    assert doomed == [("data-0-events-1", "events-1")]
    api = Claims({"data-0-events-1": "100Gi"}, ["events-0", "events-1"])
    broker_reconcile.resize_claims(cast(Kube, api), NAMES, jbod_spec(), 1, BODY)
    assert api.deleted == []


def test_a_leaving_volume_stays_until_its_replicas_moved_off() -> None:
    volumes = jbod_spec([{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "remove": True,
                                                    "deleteClaim": True},
                         {"id": 3, "size": "1Gi"}]).storage.jbod_volumes
    live = ("data-0", "data-1", "data-2")  # 2: deleted from the list; 3: added
    assert [(v.id, v.remove) for v in jbod.leaving_volumes(volumes, live)] == [
        (1, True), (2, True)]
    assert [v.id for v in jbod.effective_volumes(volumes, live, drained=False)] == [0, 1, 2, 3]
    assert [v.id for v in jbod.effective_volumes(volumes, live, drained=True)] == [0, 3]
    # Without a StatefulSet (a new Broker) a removed volume is simply not made.
    assert [v.id for v in jbod.effective_volumes(volumes, (), drained=True)] == [0, 3]
    assert jbod.needs_recreate(live, ("data-0", "data-3"))
    assert not jbod.needs_recreate(("data-1", "data-0"), ("data-0", "data-1"))
    assert not jbod.needs_recreate((), ("data-0",))  # nothing to re-create: apply creates it
    # The brokers run with the leaving volume until drained: it is in log.dirs meanwhile.
    spec = jbod_spec([{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}])
    assert builders.broker_properties(NAMES, spec)["log.dirs"].count(",") == 1


def dirs(current: dict[str, list[tuple[str, int]]],
         future: dict[str, list[tuple[str, int]]] | None = None) -> jbod.BrokerDirs:
    return jbod.BrokerDirs({d: frozenset(r) for d, r in current.items()},
                           {d: frozenset(r) for d, r in (future or {}).items()})


def test_moves_go_to_the_kept_dir_with_fewest_partitions_one_batch_at_a_time() -> None:
    state = dirs({"/a": [("t", 0)], "/b": [("t", 1), ("t", 2), ("t", 3)],
                  "/c": [("u", 0), ("u", 1)]})
    plan = jbod.plan_moves(state, ["/c"], batch_size=2)
    assert dict(plan.moves) == {("u", 0): "/a", ("u", 1): "/a"} and plan.left == 2
    plan = jbod.plan_moves(state, ["/b"], batch_size=10)  # ties: the first dir by name
    assert dict(plan.moves) == {("t", 1): "/a", ("t", 2): "/a", ("t", 3): "/c"}
    assert len(jbod.plan_moves(state, ["/b"], batch_size=1).moves) == 1
    # A move still copying (a future log): no new batch; it counts as left while in a leaving
    # dir, and the dir is drained only when nothing is left.
    moving = dirs({"/a": [("t", 0)], "/b": [("t", 1)]}, {"/a": [("t", 1)]})
    assert jbod.plan_moves(moving, ["/b"], 5) == jbod.MovePlan({}, 1, 1)
    done = dirs({"/a": [("t", 0), ("t", 1)], "/b": []})
    assert jbod.plan_moves(done, ["/b"], 5) == jbod.MovePlan({}, 0, 0)
    into_leaving = dirs({"/a": [("t", 0)], "/b": []}, {"/b": [("t", 0)]})
    assert jbod.plan_moves(into_leaving, ["/b"], 5).left == 1
    alone = jbod.plan_moves(dirs({"/b": [("t", 0)]}), ["/b"], 5)
    assert alone.refused == "no other log dir on this broker" and not alone.moves


def test_claims_of_a_removed_delete_claim_volume_go_once_unmounted() -> None:
    volumes = jbod_spec([{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "remove": True,
                                                    "deleteClaim": True},
                         {"id": 2, "size": "1Gi", "remove": True}]).storage.jbod_volumes
    existing = ["data-0-kafka-0", "data-1-kafka-0", "data-1-kafka-1", "data-2-kafka-0"]
    assert jbod.claims_of_removed(volumes, "kafka", existing, ["data-1-kafka-1"]) == [
        "data-1-kafka-0"]


class Sts:
    """A live StatefulSet and what ``recreate`` does to it."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str | None]] = []

    def delete(self, kind: str, namespace: str | None, name: str,
               propagation_policy: str | None = None) -> bool:
        self.deleted.append((name, propagation_policy))
        return True

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj  # Events


def test_a_changed_claim_template_recreates_the_stateful_set_orphaning_its_pods() -> None:
    spec = jbod_spec()
    live = builders.build_stateful_set(NAMES, spec)
    added = builders.build_stateful_set(NAMES, jbod_spec([*VOLUMES, {"id": 2, "size": "1Gi"}]))
    api = Sts()
    assert not volume_removal.recreate(cast(Kube, api), BODY, live, live)
    assert not volume_removal.recreate(cast(Kube, api), BODY, None, added)
    assert api.deleted == []
    assert volume_removal.recreate(cast(Kube, api), BODY, live, added)
    assert api.deleted == [("events", "Orphan")]


def test_a_drain_waits_for_every_broker_and_reports_a_refused_move(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {0: dirs({"/a": [], "/b": [("t", 0)]}), 1: dirs({"/a": [("t", 0)], "/b": []})}
    sent: list[tuple[int, dict[tuple[str, int], str]]] = []
    refusals: dict[tuple[str, int], str] = {}
    monkeypatch.setattr(log_dirs, "brokers", lambda *a: {n: ("h", n) for n in answers})
    monkeypatch.setattr(log_dirs, "describe", lambda address, *a: answers[address[1]])

    def alter(address: tuple[str, int], moves: dict[tuple[str, int], str],
              *a: Any) -> dict[tuple[str, int], str]:
        sent.append((address[1], dict(moves)))
        return refusals

    monkeypatch.setattr(log_dirs, "alter", alter)
    missing = volume_removal.drain("h:1", ["/b"], [0, 1, 2], 1.0, 5)
    assert (missing.drained, missing.reason) == (False, volume_removal.LOG_DIRS_UNAVAILABLE)
    assert "[2]" in missing.message and sent == []
    moving = volume_removal.drain("h:1", ["/b"], [0, 1], 1.0, 5)
    assert (moving.reason, moving.left, moving.moved) == (volume_removal.MOVING_REPLICAS, 1, 1)
    assert sent == [(0, {("t", 0): "/a"})]
    refusals[("t", 0)] = "KAFKA_STORAGE_ERROR"
    refused = volume_removal.drain("h:1", ["/b"], [0, 1], 1.0, 5)
    assert refused.reason == volume_removal.MOVE_REFUSED and "KAFKA_STORAGE_ERROR" in \
        refused.message
    answers[0] = dirs({"/a": [("t", 0)], "/b": []})
    done = volume_removal.drain("h:1", ["/b"], [0, 1], 1.0, 5)
    assert done.drained and done.reason == volume_removal.VOLUMES_REMOVED

    status: dict[str, Any] = {"conditions": []}
    leaving = jbod_spec([{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "remove": True}]
                        ).storage.jbod_volumes[1:]
    volume_removal.report(status, moving, leaving, {}, 3)
    assert status["volumeRemoval"] == {"volumes": [1], "replicasLeft": 1,
                                       "state": "MovingReplicas", "message": moving.message}
    assert (status["conditions"][0]["type"], status["conditions"][0]["status"]) == (
        "VolumeRemoving", "True")
    after: dict[str, Any] = {"conditions": []}
    volume_removal.report(after, None, (), status, 4)  # left: null clears the status field
    assert after["volumeRemoval"] is None
    assert (after["conditions"][0]["status"], after["conditions"][0]["reason"]) == (
        "False", "VolumesRemoved")


def test_kube_delete_sends_the_propagation_policy() -> None:
    calls: list[Any] = []

    class Api:
        def param_serialize(self, method: str, path: str, **kw: Any) -> tuple[Any, ...]:
            calls.append((method, path, kw.get("query_params")))
            return method, path, {}, None, []

        def call_api(self, *a: Any, **kw: Any) -> Any:
            class Response:
                status, reason = 200, "OK"

                def read(self) -> bytes:
                    return b""
            return Response()

    Kube(cast(Any, Api())).delete("StatefulSet", "kafka", "events", propagation_policy="Orphan")
    assert calls == [("DELETE", "/apis/apps/v1/namespaces/kafka/statefulsets/events",
                      [("propagationPolicy", "Orphan")])]


def test_a_volume_out_of_the_stateful_set_is_drained_until_every_pod_rolled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = jbod_spec([{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "remove": True}])
    drained: list[list[str]] = []

    def drain(bootstrap: str, leaving: list[str], *a: Any) -> volume_removal.DrainOutcome:
        drained.append(leaving)
        return volume_removal.DrainOutcome(False, volume_removal.MOVING_REPLICAS, "1 left", 1)

    monkeypatch.setattr(volume_removal, "drain", drain)

    class Pods:
        def __init__(self, mounts: list[str]) -> None:
            self.mounts = mounts

        def list(self, kind: str, namespace: str | None, selector: Any = None) -> list[Obj]:
            return [{"metadata": {"name": "events-0"}, "spec": {"containers": [
                {"volumeMounts": [{"name": m} for m in self.mounts]}]}}]

    live = builders.build_stateful_set(NAMES, jbod_spec([{"id": 0, "size": "1Gi"}]))
    api = cast(Kube, Pods(["data-0", "data-1"]))  # the pod has not restarted yet
    effective, outcome, leaving = volume_removal.effective_spec(
        api, NAMES, spec, live, "b:9092", 1, 1.0, 5)
    assert drained == [["/var/lib/strata/data-1/data"]] and [v.id for v in leaving] == [1]
    assert outcome is not None and not outcome.drained  # the roll waits for it
    assert [v.id for v in effective.storage.volumes] == [0]  # not put back in the StatefulSet
    _, outcome, _ = volume_removal.effective_spec(cast(Kube, Pods(["data-0"])), NAMES, spec,
                                                  live, "b:9092", 1, 1.0, 5)
    assert outcome is None and len(drained) == 1  # rolled: nothing left to ask
