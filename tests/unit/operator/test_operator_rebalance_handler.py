"""The Rebalance reconcile and deletion (``rebalance_handler.py``) against an in-memory API server
and the in-memory cluster of ``test_operator_rebalance`` (its controller carries out a batch
only when told to): nothing moves before approval, one throttled batch per pass, each waited
for, the preferred leaders elected, ``Ready``; refused while another rebalance of the Broker
runs, and the Broker's own run waiting for a started Rebalance (never both waiting); a missing
Broker; a deletion waits for the batch in flight, then clears its throttles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import pytest

from strata.operator import rebalance, rebalance_handler
from strata.operator.model import BrokerSpec
from strata.operator.settings import Settings
from strata.operator.throttle import ThrottlePlan

from .test_operator_rebalance import Cluster

NS = "kafka"
RF2 = {("t", p): ((p % 3), ((p + 1) % 3)) for p in range(6)}


class Api:
    """The calls the handler makes, in memory: Brokers, Rebalances and Events."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {
            ("Broker", "events"): {"metadata": {"name": "events", "namespace": NS},
                                   "spec": {"metadata": {"managed": True}}}}
        self.events: list[dict[str, Any]] = []

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, name))

    def list(self, kind: str, namespace: str | None,
             selector: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        return [o for (k, _), o in self.objects.items() if k == kind]

    def patch_status(self, kind: str, namespace: str, name: str,
                     status: dict[str, Any]) -> dict[str, Any]:
        obj = self.objects[(kind, name)]
        merged = {**(obj.get("status") or {}), **status}
        obj["status"] = {k: v for k, v in merged.items() if v is not None}
        return obj

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert obj["kind"] == "Event"
        self.events.append(obj)
        return obj

    def add(self, name: str, approved: bool = False, **spec: Any) -> None:
        annotations = {"strata.dev/rebalance-approve": "true"} if approved else {}
        self.objects[("Rebalance", name)] = {
            "apiVersion": "strata.dev/v1beta1", "kind": "Rebalance",
            "metadata": {"name": name, "namespace": NS, "generation": 1, "uid": name,
                         "annotations": annotations},
            "spec": {"brokerRef": "events", "mode": "remove-brokers", "brokers": [2], **spec}}

    def approve(self, name: str) -> None:
        self.objects[("Rebalance", name)]["metadata"]["annotations"] = {
            "strata.dev/rebalance-approve": "true"}

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.objects[("Rebalance", name)].get("status") or {})

    def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in self.events if e["involvedObject"]["name"] == name]


def run(api: Api, cluster: Cluster, name: str = "r") -> dict[str, Any]:
    return rebalance_handler.reconcile(api.objects[("Rebalance", name)], api,  # type: ignore[arg-type]
                                       lambda bootstrap, config: cluster)  # type: ignore[arg-type,return-value]


def test_nothing_moves_before_approval_then_throttled_batches_one_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rebalance_handler, "SETTINGS", Settings(rebalance_batch_size=2))
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    api.add("r", throttle=1000)
    for _ in range(3):
        status = run(api, cluster)
        assert status["state"] == "ProposalReady" and not cluster.sent
    assert status["proposal"]["moves"] == 4 and status["progress"]["batchesTotal"] >= 2
    assert api.reasons("r") == ["ProposalReady"]
    api.approve("r")
    sent = 0
    while (status := run(api, cluster))["state"] == "Rebalancing":
        if "inFlight" in status:
            assert len(cluster.sent) == sent + 1, "one batch per pass"
            sent += 1
            assert status["throttle"]["rate"] == 1000 and cluster.throttles
            held = run(api, cluster)  # the controller has not finished: wait
            assert len(cluster.sent) == sent and "still moving" in held["conditions"][2][
                "message"]
            cluster.finish()
    assert status["state"] == "Ready", status
    assert sent == status["progress"]["batchesDone"] == status["progress"]["batchesTotal"]
    status = api.status("r")  # the patches applied (null deletes)
    assert not cluster.throttles and "throttle" not in status and "inFlight" not in status
    assert not [tp for tp, r in cluster.assignment_now.items() if 2 in r]
    assert all(cluster.leader[tp] == r[0] for tp, r in cluster.assignment_now.items()
               if tp in {tp for batch in cluster.sent for tp in batch})
    reasons = api.reasons("r")
    assert reasons[:2] == ["ProposalReady", "RebalanceApproved"]
    assert reasons[-1] == "RebalanceComplete" and "Rebalancing" in reasons
    run(api, cluster)  # Ready is final
    assert api.status("r") == status
    assert len(cluster.sent) == sent


def test_throttle_zero_means_none_and_absent_the_operator_default() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    api.add("r", approved=True, throttle=0)
    run(api, cluster)
    run(api, cluster)
    status = api.status("r")
    assert "inFlight" in status and "throttle" not in status and not cluster.throttles
    api2, cluster2 = Api(), Cluster([0, 1, 2], RF2)
    api2.add("r", approved=True)
    run(api2, cluster2)
    assert run(api2, cluster2)["throttle"]["rate"] == rebalance_handler.SETTINGS.rebalance_throttle


def test_refused_while_another_rebalance_of_the_broker_runs() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    api.add("first", approved=True)
    api.add("second", approved=True)
    run(api, cluster, "first")
    assert run(api, cluster, "first")["state"] == "Rebalancing"
    sent = len(cluster.sent)
    run(api, cluster, "second")  # its proposal
    blocked = run(api, cluster, "second")
    assert blocked["state"] == "NotReady" and len(cluster.sent) == sent
    assert {c["type"]: c["reason"] for c in blocked["conditions"]}["Ready"] == (
        "AnotherRebalanceRunning")
    assert "Rebalance first" in blocked["conditions"][2]["message"]
    # The Broker's own rebalance (its Rebalancing condition True) blocks too.
    api.objects[("Rebalance", "first")]["status"]["state"] = "Ready"
    api.objects[("Broker", "events")]["status"] = {"conditions": [
        {"type": "Rebalancing", "status": "True", "reason": "Rebalancing"}]}
    assert "Broker events" in run(api, cluster, "second")["conditions"][2]["message"]
    assert len(cluster.sent) == sent


def test_a_missing_broker_is_a_condition() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    del api.objects[("Broker", "events")]
    api.add("r")
    status = run(api, cluster)
    assert status["state"] == "NotReady"
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Ready"] == "BrokerNotFound"
    assert api.reasons("r") == ["BrokerNotFound"]


def test_deletion_waits_for_the_batch_in_flight_then_clears_its_throttles() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    api.add("r", approved=True, throttle=500)
    run(api, cluster)
    assert "inFlight" in run(api, cluster)
    body = api.objects[("Rebalance", "r")]
    with pytest.raises(kopf.TemporaryError):
        rebalance_handler.delete(body, api, 1.0,  # type: ignore[arg-type]
                                 lambda b, c: cluster)  # type: ignore[arg-type,return-value]
    assert cluster.throttles
    cluster.finish()
    message = rebalance_handler.delete(body, api, 2.0,  # type: ignore[arg-type]
                                       lambda b, c: cluster)  # type: ignore[arg-type,return-value]
    assert "stopped after 1 batches" in message
    assert not cluster.throttles and ("clear", ThrottlePlan.from_status(
        api.status("r")["throttle"])) in cluster.throttle_log
    assert api.reasons("r")[-1] == "RebalanceStopped"
    assert len(cluster.sent) == 1  # no batch after the deletion


def test_the_broker_own_rebalance_and_a_rebalance_never_wait_for_each_other() -> None:
    api, cluster = Api(), Cluster([0, 1, 2], RF2)
    api.add("r", approved=True)
    run(api, cluster)
    assert run(api, cluster)["state"] == "Rebalancing"
    # The Broker's own run, still Pending, waits for the running Rebalance...
    pending = {"state": "Pending", "reason": "Requested", "batchesDone": 0, "batchesTotal": 0}
    broker = api.objects[("Broker", "events")]

    def no_cluster() -> Any:
        raise AssertionError("a waiting run asks no cluster")

    waiting = rebalance.run_pass(api, broker, BrokerSpec(), no_cluster,  # type: ignore[arg-type]
                                 pending, 3, 3, False)
    assert waiting is not None and waiting["state"] == "Pending"
    assert waiting["message"] == "waiting for Rebalance r to finish"
    # ... and the started Rebalance is not held back by it (its condition is True meanwhile).
    broker["status"] = {"rebalance": pending, "conditions": [
        {"type": "Rebalancing", "status": "True", "reason": "Rebalancing"}]}
    cluster.finish()
    assert run(api, cluster)["state"] == "Ready"  # its one batch done, leaders elected
    # A Rebalance not started yet waits for the Broker's run.
    api.add("later", approved=True, mode="full", brokers=[])
    run(api, cluster, "later")
    assert run(api, cluster, "later")["state"] == "NotReady"
