"""The Rebalance resource's pure parts (``rebalance_resource.py``): spec validation, the
remove-brokers proposal (nothing left on the named brokers, RF kept, refused when the rest
cannot hold RF), the state decisions (no run before approval, one rebalance per Broker), the
status (conditions per state, progress, the plan kept in it) and the CRD
(``rebalance_crd.py``: v1beta1 only, printer columns, admission rules)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import jsonschema
import pytest

from strata.operator import rebalance_resource as rr
from strata.operator.rebalance_crd import REBALANCE_CRD
from strata.operator.rebalance_resource import (
    ProposalError,
    RebalanceSpec,
    approved,
    next_step,
    propose,
    read_spec,
)

from .test_operator_crds import admitted, validate

RACKS: dict[int, str | None] = {0: None, 1: None, 2: None}
RF2 = {("t", p): ((p % 3), ((p + 1) % 3)) for p in range(6)}


def test_read_spec_defaults_and_errors() -> None:
    spec = read_spec({"brokerRef": "strata", "mode": "remove-brokers", "brokers": [2, 2]})
    assert spec == RebalanceSpec("strata", "remove-brokers", (2,), None)
    assert read_spec({"brokerRef": "s"}).mode == "full"
    for bad, field in [({}, "brokerRef"), ({"brokerRef": "s", "mode": "x"}, "mode"),
                       ({"brokerRef": "s", "mode": "remove-brokers"}, "brokers"),
                       ({"brokerRef": "s", "brokers": ["a"]}, "brokers"),
                       ({"brokerRef": "s", "throttle": -1}, "throttle")]:
        with pytest.raises(ProposalError, match=field):
            read_spec(bad)


def test_remove_brokers_leaves_nothing_on_the_broker_and_keeps_rf() -> None:
    spec = RebalanceSpec("s", "remove-brokers", (1,), None)
    proposal = propose(spec, RACKS, RF2, batch_size=2)
    final = dict(RF2)
    for batch in proposal.batches:
        assert len(batch) <= 2
        final.update(batch)
    for tp, replicas in final.items():
        assert 1 not in replicas
        assert len(set(replicas)) == len(RF2[tp]) == 2
    # 4 of the 6 partitions had a replica on broker 1: each copies once
    assert proposal.replica_moves == 4
    counts = Counter(b for r in final.values() for b in r)
    assert counts == {0: 6, 2: 6}
    assert proposal.status()["batches"] == len(proposal.batches)


def test_remove_brokers_refused_when_rf_cannot_be_held() -> None:
    rf3 = {("t", 0): (0, 1, 2)}
    with pytest.raises(ProposalError, match="only 2 brokers would remain"):
        propose(RebalanceSpec("s", "remove-brokers", (0,), None), RACKS, rf3, 10)
    with pytest.raises(ProposalError, match="not in the cluster"):
        propose(RebalanceSpec("s", "remove-brokers", (7,), None), RACKS, rf3, 10)


def test_full_mode_on_an_even_cluster_proposes_nothing() -> None:
    proposal = propose(RebalanceSpec("s", "full", (), None), RACKS, RF2, 5)
    assert proposal.batches == () and proposal.replica_moves == 0


def step(**kw: object) -> str:
    args: dict[str, object] = dict(broker_exists=True, has_proposal=True, is_approved=True,
                                   other_running=None, batches_done=0, batches_total=2,
                                   leaders_elected=False, deleting=False)
    args.update(kw)
    return next_step(**args).action  # type: ignore[arg-type]  # kwargs built for the test


def test_state_decisions() -> None:
    assert step(broker_exists=False) == "blocked"
    assert step(has_proposal=False) == "propose"
    assert step(is_approved=False) == "wait-approval"
    assert step(other_running="Broker strata (scale)") == "blocked"
    assert step() == "run-batch"
    assert step(batches_done=2) == "elect-leaders"
    assert step(batches_done=2, leaders_elected=True) == "done"
    assert step(deleting=True) == "stop"
    assert approved({"strata.dev/rebalance-approve": "True"})
    assert not approved({})


# ------------------------------------------------------------------------------ status
def test_plan_round_trips_through_the_status() -> None:
    proposal = propose(RebalanceSpec("s", "remove-brokers", (1,), None), RACKS, RF2, 3)
    entries = rr.plan_status(proposal)
    assert {e["batch"] for e in entries} == set(range(len(proposal.batches)))
    assert rr.plan_from_status(entries) == list(proposal.batches)
    assert rr.plan_from_status(None) == []


def test_status_conditions_and_printer_fields_per_state() -> None:
    def built(state: str, reason: str, has_proposal: bool = True) -> dict[str, Any]:
        return rr.build_status(state=state, reason=reason, message="m",
                               has_proposal=has_proposal, proposal_message="4 moves",
                               generation=3, now="2026-01-01T00:00:00Z",
                               progress=rr.progress(1, 2, False), inFlight=None)

    def kinds(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}

    waiting = built("ProposalReady", "WaitingForApproval")
    assert kinds(waiting) == {"ProposalReady": ("True", "ProposalReady"),
                              "Rebalancing": ("False", "WaitingForApproval"),
                              "Ready": ("False", "WaitingForApproval")}
    assert all(c["observedGeneration"] == 3 for c in waiting["conditions"])
    assert waiting["progress"]["summary"] == "1/2" and waiting["inFlight"] is None
    assert kinds(built("Rebalancing", "Rebalancing"))["Rebalancing"] == ("True", "Rebalancing")
    assert kinds(built("Ready", "RebalanceComplete")) == {
        "ProposalReady": ("True", "ProposalReady"),
        "Rebalancing": ("False", "RebalanceComplete"), "Ready": ("True", "RebalanceComplete")}
    refused = built("NotReady", "ProposalRefused", has_proposal=False)
    assert kinds(refused)["ProposalReady"] == ("False", "ProposalRefused")
    assert [rr.state_of(a) for a in ("propose", "wait-approval", "blocked", "run-batch",
                                     "elect-leaders", "done", "stop")] == [
        "PendingProposal", "ProposalReady", "NotReady", "Rebalancing", "Rebalancing", "Ready",
        "Stopped"]
    assert set(rr.STATES) == set(REBALANCE_CRD["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]["properties"]["status"]["properties"]["state"]["enum"])


def rebalance_cr(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Rebalance",
            "metadata": {"name": "r", "namespace": "kafka"},
            "spec": {"brokerRef": "events", **spec}}


def test_the_crd_is_served_at_v1beta1_only_with_columns_and_admission_rules() -> None:
    versions = REBALANCE_CRD["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [
        ("v1beta1", True, True)]
    assert [c["name"] for c in versions[0]["additionalPrinterColumns"]] == [
        "Broker", "Mode", "State", "Progress", "Reason", "Age"]
    assert "status" in versions[0]["subresources"]
    validate(rebalance_cr(mode="remove-brokers", brokers=[2], throttle=0))
    with pytest.raises(jsonschema.ValidationError):
        validate(rebalance_cr(mode="sideways"))
    with pytest.raises(jsonschema.ValidationError):
        validate(rebalance_cr(throttle=-1))
    assert admitted(REBALANCE_CRD, rebalance_cr(mode="remove-brokers"), None) == [
        "mode remove-brokers needs brokers"]
    assert admitted(REBALANCE_CRD, rebalance_cr(mode="full"), None) == []
    moved = rebalance_cr()
    moved["spec"]["brokerRef"] = "other"
    assert admitted(REBALANCE_CRD, moved, rebalance_cr()) == ["brokerRef cannot be changed"]
