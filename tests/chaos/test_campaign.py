"""The short fault campaign that ``make test`` runs: one fixed seed, at least 30 faults of every
kind this machine can play, and every counter of the summary table must be zero.

Real processes: 3 brokers (and, for network partitions, an etcd and network namespaces made by
the campaign itself, addresses in 198.18.0.0/15 only on links it creates), three idempotent
acks=all confluent-kafka producers and a consumer group. Everything is stopped by PID and the
namespaces deleted in the campaign's ``finally``, on success and on failure. Network-partition
kinds need root, ``ip netns`` and etcd; where they are missing the campaign plays the process
kinds only and ``test_netns.py`` reports the reason as a skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.cli.chaos import print_report
from strata.cli.chaos_campaign import CampaignConfig, kinds_available, run_campaign
from strata.cli.chaos_nemesis import FaultKind, Timing
from strata.cli.chaos_netns import netns_support, network_campaign

SEED = 20261126
FAULTS = 30
# Shorter than ``--quick``: a restart costs a broker 3-6 s on a busy 2-core machine, so this is
# what fits 30 faults and the checks in 5 minutes. A stopped broker is back well inside its 9 s
# session; a pause outlasts replica.lag.time.max.ms (2 s), so the ISR shrinks; a network cut
# outlasts the session, so leadership moves.
TEST_TIMING = Timing(gap=(0.1, 0.4), hold=(0.2, 0.8), pause=(3.2, 4.5), cut=(9.5, 11.0))
BUDGET_S = 240.0  # no fault starts after this; the checks take about 10-30 s more

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(300)
def test_short_campaign_loses_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    netns_ok, why = netns_support()
    kinds, skipped = kinds_available(list(FaultKind), netns_ok)
    config = CampaignConfig(workdir=tmp_path / "campaign", seed=SEED, faults=FAULTS,
                            kinds=kinds, timing=TEST_TIMING, time_budget_s=BUDGET_S)
    report = (network_campaign(config, print) if netns_ok
              else run_campaign(config, say=print))
    report.skipped = [f"{line} ({why})" for line in skipped]
    print_report(report)
    table = capsys.readouterr().out
    assert report.aborted is None, table
    assert len(report.faults) >= FAULTS, f"only {len(report.faults)} faults in time\n{table}"
    assert report.read_complete, table
    assert report.result.replicas_checked and report.result.group_checked, table
    counters = report.result.counters()
    # Re-sends under a bumped epoch are librdkafka's (see ``chaos_checker``), reported not failed.
    informational = ("acknowledged", "acknowledged without offset", "read",
                     "re-sent by the client under a new producer epoch")
    assert {k: counters[k] for k in counters if k not in informational} == {
        "lost": 0, "duplicated": 0, "reordered": 0, "sequence breaks": 0, "wrong offset": 0,
        "fatal producer errors": 0, "divergent partitions": 0, "group misses": 0,
        "commit regressions": 0}, table
    assert counters["acknowledged"] > 0, table
