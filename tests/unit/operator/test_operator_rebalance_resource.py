"""The Rebalance resource's pure parts (``rebalance_resource.py``): spec validation, the
remove-brokers proposal (nothing left on the named brokers, RF kept, refused when the rest
cannot hold RF), and the state decisions (no run before approval, one rebalance per Broker)."""

from __future__ import annotations

from collections import Counter

import pytest

from strata.operator.rebalance_resource import (
    ProposalError,
    RebalanceSpec,
    approved,
    next_step,
    propose,
    read_spec,
)

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
