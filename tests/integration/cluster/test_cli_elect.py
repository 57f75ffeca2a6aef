"""``strata cluster elect`` on a three-broker cluster: the preferred replica gets leadership
back after a controlled shutdown moved it away; a second election is not needed; bad
partitions and options are named."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240),
              pytest.mark.parametrize("backend", ["sqlite"])]

STRATA = Path(sys.executable).parent / "strata"


def _elect(cluster: ClusterProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STRATA), "cluster", "elect", "-b", cluster.live_bootstrap(),
                           "--timeout", "20", *args],
                          capture_output=True, text=True, timeout=90, check=False)


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
    assert ["prefs", "0", "ELECTION_NOT_NEEDED"] == again.stdout.splitlines()[-1].split()[:3]

    missing = _elect(cluster, "--topic", "prefs", "--partition", "7")
    assert missing.returncode == 1 and "there is no partition 7" in missing.stderr
    orphan = _elect(cluster, "--partition", "0")
    assert orphan.returncode == 2 and "--partition needs --topic" in orphan.stderr
