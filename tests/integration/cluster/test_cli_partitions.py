"""``strata cluster elect|reassign|reassignments`` on a three-broker cluster: the preferred
replica gets leadership back after a controlled shutdown moved it away; a second election is
not needed; a partition moves to other brokers; bad partitions, brokers and files are named."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ..broker_process import STRATA
from .cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240),
              pytest.mark.parametrize("backend", ["sqlite"])]



def _cluster_cli(cluster: ClusterProcesses, command: str, *args: str
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STRATA), "cluster", command, "-b", cluster.live_bootstrap(),
                           "--timeout", "20", *args],
                          capture_output=True, text=True, timeout=90, check=False)


def _elect(cluster: ClusterProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    return _cluster_cli(cluster, "elect", *args)


def test_preferred_election_from_the_cli(make_cluster: Callable[..., ClusterProcesses]
                                         ) -> None:
    cluster = make_cluster()
    cluster.create_topic("prefs", assignment=[[0, 1, 2], [1, 2, 0]])
    assert cluster.broker(0).stop() == 0  # controlled shutdown: leadership of 0 moves away
    moved = cluster.partition("prefs")
    assert moved is not None and moved.leader in (1, 2)
    cluster.broker(0).start()
    cluster.wait_for(lambda: (p := cluster.partition("prefs")) is not None and 0 in p.isr,
                     "broker 0 back in the ISR")

    done = _elect(cluster, "--topic", "prefs", "--format", "json")
    assert done.returncode == 0, done.stderr
    results = {r["partition"]: r["result"] for r in map(json.loads, done.stdout.splitlines())}
    assert results == {0: "elected", 1: "ELECTION_NOT_NEEDED"}
    cluster.wait_for(lambda: (p := cluster.partition("prefs")) is not None and p.leader == 0,
                     "the preferred replica leads again")

    again = _elect(cluster, "--topic", "prefs", "--partition", "0")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1].split()[:3] == ["prefs", "0", "ELECTION_NOT_NEEDED"]

    missing = _elect(cluster, "--topic", "prefs", "--partition", "7")
    assert missing.returncode == 1 and "there is no partition 7" in missing.stderr
    orphan = _elect(cluster, "--partition", "0")
    assert orphan.returncode == 2 and "--partition needs --topic" in orphan.stderr


def test_reassign_from_the_cli(make_cluster: Callable[..., ClusterProcesses],
                               tmp_path: Path) -> None:
    cluster = make_cluster()
    cluster.create_topic("moving", assignment=[[0, 1], [1, 2]])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [2, 1]}]}))
    started = _cluster_cli(cluster, "reassign", "--reassignment-json-file", str(plan),
                           "--format", "json")
    assert started.returncode == 0, started.stderr
    assert [json.loads(line)["result"] for line in started.stdout.splitlines()] == ["started"]
    single = _cluster_cli(cluster, "reassign", "-t", "moving", "-p", "1", "--replicas", "0,1")
    assert single.returncode == 0, single.stderr
    cluster.wait_for(lambda: all(
        (p := cluster.partition("moving", i)) is not None and set(p.replicas) == want
        for i, want in ((0, {1, 2}), (1, {0, 1}))), "both partitions moved")
    cluster.wait_for(lambda: _cluster_cli(cluster, "reassignments", "--format", "json"
                                          ).stdout.strip() == "", "no move in progress")

    unknown = _cluster_cli(cluster, "reassign", "-t", "moving", "-p", "0", "--replicas", "9")
    assert unknown.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in unknown.stdout
    nothing = _cluster_cli(cluster, "reassign", "-t", "moving", "-p", "0", "--cancel")
    assert nothing.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in nothing.stdout
    plan.write_text('{"version": 1}')
    broken = _cluster_cli(cluster, "reassign", "--reassignment-json-file", str(plan))
    assert broken.returncode == 2 and "partitions" in broken.stderr
    both = _cluster_cli(cluster, "reassign", "-t", "moving", "-p", "0")
    assert both.returncode == 2 and "--replicas or --cancel" in both.stderr
