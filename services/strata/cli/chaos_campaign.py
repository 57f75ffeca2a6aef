"""One fault campaign from start to verdict: cluster, workload, nemesis, healing, checks.

Owns the order of a run (and nothing the other chaos modules own):

1. start the metadata store (SQLite file, or etcd for network partitions) and N brokers;
2. create the topic (``partitions``, RF 3, ``min.insync.replicas=2``, unclean election off);
3. start the producers and the group consumer, wait for the first acknowledgements;
4. play every planned fault (gap, inject, hold, heal, wait healthy);
5. heal: wait for every partition led with a full ISR, stop the producers (flushing every
   pending delivery report), read the whole topic, let the group consumer drain to the high
   watermarks;
6. stop every broker (SIGTERM) and read every replica's log files up to the high watermark;
7. ``chaos_checker.check`` → ``CampaignReport`` (also written to ``report.json``).

Everything started is stopped in ``finally`` by PID (brokers, etcd), and network namespaces
are deleted, on success and on failure. The run directory keeps every broker's log,
``deliveries.jsonl``, ``clients.log``, ``nemesis.log`` and ``report.json``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strata.cli.chaos_checker import (
    CheckResult,
    Place,
    ReplicaRead,
    Writer,
    check,
    writers_by_place,
)
from strata.cli.chaos_cluster import BrokerStartError, ChaosCluster
from strata.cli.chaos_nemesis import (
    NETWORK_KINDS,
    FaultKind,
    FaultRecord,
    Nemesis,
    Timing,
    plan_faults,
)
from strata.cli.chaos_segments import batch_writers, partition_dirs, read_replica
from strata.cli.chaos_workload import (
    DeliveryLog,
    GroupConsumer,
    ProducerWorker,
    client_logger,
    read_topic,
)

if TYPE_CHECKING:
    from strata.cli.chaos_netns import Network

TOPIC = "chaos"
GROUP = "chaos-group"
HEAL_TIMEOUT_S = 90.0
READ_TIMEOUT_S = 120.0
EVIDENCE_CAP = 20


@dataclass(frozen=True)
class CampaignConfig:
    workdir: Path
    seed: int
    faults: int
    kinds: Sequence[FaultKind]
    brokers: int = 3
    partitions: int = 6
    producers: int = 3
    rate: float = 100.0  # records/s per producer
    timing: Timing = field(default_factory=Timing)
    group_reopen_s: float = 15.0
    time_budget_s: float | None = None  # no fault is started after this many seconds
    broker_config: Mapping[str, str] = field(default_factory=dict)  # over CAMPAIGN_CONFIG


@dataclass
class CampaignReport:
    config: CampaignConfig
    faults: list[FaultRecord]
    result: CheckResult
    skipped: list[str] = field(default_factory=list)
    aborted: str | None = None
    read_complete: bool = True
    failed_deliveries: dict[str, int] = field(default_factory=dict)
    group_reopens: int = 0
    group_resumes: int = 0  # partition assignments the commit-regression check looked at
    seconds: float = 0.0
    # "partition:offset" of each duplicated or re-sent copy -> [producer id, epoch, sequence]
    duplicate_writers: dict[str, list[int]] = field(default_factory=dict)

    def faults_by_kind(self) -> dict[str, int]:
        return dict(Counter(str(f.kind) for f in self.faults))

    def ok(self) -> bool:
        return (self.result.ok() and self.aborted is None and self.read_complete
                and self.result.replicas_checked and self.result.group_checked)

    def summary_rows(self) -> list[tuple[str, str]]:
        """(measure, value) rows of the summary table."""
        rows = [(f"faults: {kind}", str(n)) for kind, n in sorted(self.faults_by_kind().items())]
        rows.append(("faults: total", str(len(self.faults))))
        rows.append(("faults: not healthy 90 s after healing",
                     str(sum(1 for f in self.faults if f.healed_s is None))))
        rows.append(("SIGTERMed brokers that needed SIGKILL (30 s)",
                     str(sum(len(f.forced) for f in self.faults))))
        rows.append(("group consumer: reopens / partitions resumed",
                     f"{self.group_reopens} / {self.group_resumes}"))
        rows += [(name, str(value)) for name, value in self.result.counters().items()]
        if not self.result.replicas_checked:
            rows.append(("divergent partitions", "not checked"))
        if not self.result.group_checked:
            rows.append(("group misses", "not checked"))
            rows.append(("commit regressions", "not checked"))
        return rows

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "seed": self.config.seed, "faults_planned": self.config.faults,
            "kinds": [str(k) for k in self.config.kinds], "seconds": round(self.seconds, 1),
            "aborted": self.aborted, "skipped": self.skipped, "read_complete": self.read_complete,
            "faults_by_kind": self.faults_by_kind(), "counters": r.counters(),
            "failed_deliveries": self.failed_deliveries, "group_reopens": self.group_reopens,
            "group_resumes": self.group_resumes,
            "faults": [{"index": f.index, "kind": str(f.kind), "victims": f.victims,
                        "notes": f.notes, "started": f.started, "healed_s": f.healed_s,
                        "forced": f.forced}
                       for f in self.faults],
            "evidence": {
                "lost": [vars_of(d) for d in r.lost[:EVIDENCE_CAP]],
                "duplicated": [[v.decode(errors="replace"), places]
                               for v, places in r.duplicated[:EVIDENCE_CAP]],
                "resent": [[v.decode(errors="replace"), places]
                           for v, places in r.resent[:EVIDENCE_CAP]],
                "duplicate_writers": self.duplicate_writers,
                "sequence_breaks": r.sequence_breaks[:EVIDENCE_CAP],
                "wrong_offset": [[vars_of(d), places]
                                 for d, places in r.wrong_offset[:EVIDENCE_CAP]],
                "reordered": [[p, o, v.decode(errors="replace"), b.decode(errors="replace")]
                              for p, o, v, b in r.reordered[:EVIDENCE_CAP]],
                "fatal_errors": r.fatal_errors[:EVIDENCE_CAP],
                "divergent": r.divergent,
                "group_misses": [vars_of(d) for d in r.group_misses[:EVIDENCE_CAP]],
                "commit_regressions": [vars(x) for x in r.commit_regressions[:EVIDENCE_CAP]],
            },
        }


def duplicate_writers(result: CheckResult, writers: Mapping[Place, Writer]
                      ) -> dict[str, list[int]]:
    """Who wrote each copy of a duplicated or re-sent value (evidence only)."""
    found: dict[str, list[int]] = {}
    for _, places in result.duplicated[:EVIDENCE_CAP] + result.resent[:EVIDENCE_CAP]:
        for place in places:
            if place in writers:
                found[f"{place[0]}:{place[1]}"] = list(writers[place])
    return found


def vars_of(delivery: Any) -> dict[str, Any]:
    return {"partition": delivery.partition, "offset": delivery.offset,
            "value": delivery.value.decode(errors="replace")}


def run_campaign(config: CampaignConfig, store_url: str | None = None,
                 network: Network | None = None,
                 say: Callable[[str], None] = print) -> CampaignReport:
    """Run one campaign in ``config.workdir`` (created); see the module docstring.

    ``store_url`` defaults to a SQLite file in the run directory; ``network`` (a
    ``chaos_netns.Network`` already set up, with its hosts and namespaces) places the brokers
    in network namespaces.
    """
    started = time.monotonic()
    workdir = config.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    store = store_url or f"sqlite:///{workdir / 'meta.db'}"
    cluster = ChaosCluster(workdir, store, config.brokers,
                           hosts=network.hosts if network else None,
                           netns=network.namespaces if network else None,
                           overrides=config.broker_config)
    plan = plan_faults(config.seed, config.faults, config.kinds, config.timing)
    nemesis_log = (workdir / "nemesis.log").open("a", encoding="utf-8")

    def log(line: str) -> None:
        nemesis_log.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        nemesis_log.flush()
        say(line)

    nemesis = Nemesis(cluster, TOPIC, config.partitions, network, log)
    deliveries_log = DeliveryLog(workdir / "deliveries.jsonl")
    logger = client_logger(workdir)
    producers: list[ProducerWorker] = []
    consumer: GroupConsumer | None = None
    records: list[FaultRecord] = []
    aborted: str | None = None
    try:
        cluster.start_all()
        if not cluster.wait_for(cluster.registered, "registered", 60):
            raise RuntimeError("the brokers did not register and elect a controller in 60 s")
        cluster.create_topic(TOPIC, config.partitions, min(3, config.brokers),
                             {"min.insync.replicas": "2",
                              "unclean.leader.election.enable": "false"})
        log(f"cluster up ({config.brokers} brokers, {store}); seed {config.seed}, "
            f"{config.faults} faults of {', '.join(config.kinds)}")
        producers = [ProducerWorker(i, cluster.bootstrap, TOPIC, config.partitions,
                                    config.rate, deliveries_log, logger)
                     for i in range(config.producers)]
        consumer = GroupConsumer(cluster.bootstrap, TOPIC, GROUP, config.group_reopen_s, logger)
        for worker in producers:
            worker.start()
        consumer.start()
        if not cluster.wait_for(lambda: all(w.observed.deliveries for w in producers),
                                "first acknowledgements", 60):
            raise RuntimeError("no acknowledgement from every producer within 60 s")
        for fault in plan:
            if config.time_budget_s is not None \
                    and time.monotonic() - started > config.time_budget_s:
                log(f"time budget of {config.time_budget_s:.0f} s spent after "
                    f"{len(records)} faults")
                break
            time.sleep(fault.gap_s)
            try:
                records.append(nemesis.run(fault))
            except BrokerStartError as exc:
                aborted = f"fault {fault.index} ({fault.kind}): a broker did not restart: {exc}"
                log(aborted)
                break
        if network is not None:
            network.heal()
        for broker in cluster.brokers.values():  # nothing stays stopped or paused
            if broker.paused:
                broker.signal(signal.SIGCONT)
            if not broker.is_running():
                with contextlib.suppress(BrokerStartError):
                    broker.spawn()
                    broker.wait_ready()
        if not cluster.wait_for(lambda: cluster.healthy(TOPIC, config.partitions,
                                                        full_isr=True),
                                "full ISR", HEAL_TIMEOUT_S):
            log(f"not every partition had a full ISR {HEAL_TIMEOUT_S:.0f} s after the last fault")
        for worker in producers:
            worker.stop()
        for worker in producers:
            worker.join(120)
        read, high_watermarks, complete = read_topic(cluster.bootstrap, TOPIC,
                                                     config.partitions, READ_TIMEOUT_S)
        log(f"read {len(read)} records; high watermarks {high_watermarks}"
            + ("" if complete else " (INCOMPLETE read)"))
        group_done = consumer.drain(high_watermarks, 60)
        if not group_done:
            log("the group consumer did not reach every high watermark in 60 s")
        view = cluster.view(TOPIC)
        isr = {p: set(s.isr) for p, s in view.partitions.items()} if view else {}
        cluster.stop_all()
        replicas = [
            ReplicaRead(node_id, p, node_id in isr.get(p, set()),
                        read_replica(path, high_watermarks.get(p, 0)),
                        batch_writers(path, high_watermarks.get(p, 0)))
            for node_id, broker in cluster.brokers.items()
            for p, path in partition_dirs(Path(broker.config["log.dirs"]), TOPIC).items()]
        deliveries = [d for w in producers for d in w.observed.deliveries]
        fatal = [e for w in producers for e in w.observed.fatal]
        result = check(deliveries, read, fatal, replicas, high_watermarks,
                       set(consumer.consumed), list(consumer.resumes))
        writers = duplicate_writers(result, writers_by_place(replicas))
        failed: Counter[str] = Counter()
        for worker in producers:
            failed.update(worker.observed.failed)
        report = CampaignReport(config, records, result, aborted=aborted,
                                read_complete=complete, failed_deliveries=dict(failed),
                                group_reopens=consumer.reopens,
                                group_resumes=len(consumer.resumes),
                                seconds=time.monotonic() - started,
                                duplicate_writers=writers)
        (workdir / "report.json").write_text(json.dumps(report.to_json(), indent=1))
        return report
    finally:
        for worker in producers:
            worker.stop()
        if consumer is not None:
            consumer.stopping.set()
        cluster.close()
        if network is not None:
            with contextlib.suppress(Exception):
                network.heal()
        deliveries_log.close()
        nemesis_log.close()


def kinds_available(kinds: Sequence[FaultKind], netns_ok: bool) -> tuple[list[FaultKind],
                                                                          list[str]]:
    """The kinds this machine can play, and why the others are skipped."""
    if netns_ok:
        return list(kinds), []
    skipped = [f"{k}: needs root and `ip netns` (network namespaces)" for k in kinds
               if k in NETWORK_KINDS]
    return [k for k in kinds if k not in NETWORK_KINDS], skipped
