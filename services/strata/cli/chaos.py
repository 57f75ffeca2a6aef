"""``strata chaos run``: the fault campaign against a local cluster it starts.

``strata chaos run --brokers 3 --faults N [--seed S] [--kinds kill-all,pause,...] [--quick]``
starts N brokers on one metadata store in a run directory, writes with idempotent acks=all
producers while the nemesis injects faults, heals, reads everything back and prints the
summary table (``CampaignReport.summary_rows``) plus the evidence behind any non-zero count.
Each fault's line goes to stderr (under a Rich progress bar when stderr is a terminal).
The same seed replays the same faults (``chaos_nemesis.plan_faults``). Network-partition kinds
need root and ``ip netns``; without them they are skipped and the reason printed. They run on an
etcd metadata store (``make etcd``) so a cut-off broker loses the store too.

Exit codes: 0 when every correctness counter is zero, 1 when one is not (or the campaign could
not finish), 2 for bad options. The run directory (``--dir``, default a new
``strata-chaos-*`` under the system's temp dir) keeps the logs and ``report.json``.
Docs: docs/chaos.md.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from strata.cli.chaos_campaign import CampaignReport, kinds_available, run_campaign
from strata.cli.chaos_nemesis import (
    NETWORK_KINDS,
    PROCESS_KINDS,
    QUICK_TIMING,
    FaultKind,
    Timing,
)
from strata.cli.errors import EXIT_USAGE, CliError, reported_errors
from strata.cli.output import print_table, progress

app = typer.Typer(help="Fault campaigns: kill, pause, damage and partition brokers under load, "
                       "then check no acknowledged record was lost.", no_args_is_help=True)

ALL_KINDS = ",".join(FaultKind)


def parse_kinds(text: str) -> list[FaultKind]:
    """``kill-all,pause`` → kinds; ``all`` is every kind, ``process`` every non-network one."""
    if text.strip() == "all":
        return list(FaultKind)
    if text.strip() == "process":
        return list(PROCESS_KINDS)
    kinds = []
    for name in (t.strip() for t in text.split(",") if t.strip()):
        try:
            kinds.append(FaultKind(name))
        except ValueError:
            raise CliError(f"--kinds: unknown fault kind {name!r} (known: {ALL_KINDS})",
                           exit_code=EXIT_USAGE) from None
    if not kinds:
        raise CliError("--kinds: name at least one fault kind", exit_code=EXIT_USAGE)
    return kinds


def parse_settings(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` → ``{"k": "v"}``; ``CliError`` naming a malformed item."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--broker-config {item!r}: expected KEY=VALUE", exit_code=EXIT_USAGE)
        out[key.strip()] = value.strip()
    return out


def print_report(report: CampaignReport) -> None:
    """The summary table on stdout, then the evidence of every non-zero counter."""
    print_table(["MEASURE", "VALUE"], report.summary_rows())
    evidence = report.to_json()["evidence"]
    lines = []
    for name, items in evidence.items():
        if items:
            lines.append(f"{name}: {items if isinstance(items, dict) else items[:5]}")
    for line in report.skipped:
        lines.append(f"skipped {line}")
    if report.aborted:
        lines.append(f"aborted: {report.aborted.splitlines()[0]}")
    if not report.read_complete:
        lines.append("the full read did not reach every high watermark")
    if report.failed_deliveries:
        lines.append(f"failed (unacknowledged) delivery reports: {report.failed_deliveries}")
    verdict = "PASS: every counter is zero" if report.ok() else "FAIL"
    lines.append(f"{verdict} (seed {report.config.seed}, {len(report.faults)} faults, "
                 f"{report.seconds:.0f} s, run directory {report.config.workdir})")
    sys.stdout.write("\n".join(lines) + "\n")


def netns_available() -> tuple[bool, str]:
    """Whether brokers can run in network namespaces here, and if not, why."""
    from strata.cli.chaos_netns import netns_support

    return netns_support()


@app.command("run")
def run(
    ctx: typer.Context,
    brokers: Annotated[int, typer.Option("--brokers", "-n", min=3,
                                         help="Brokers to start (RF 3 needs 3).")] = 3,
    faults: Annotated[int, typer.Option("--faults", min=1, help="Faults to inject.")] = 30,
    seed: Annotated[int | None, typer.Option("--seed", help="RNG seed (default: random, "
                                             "printed).")] = None,
    kinds: Annotated[str, typer.Option("--kinds", help=f"Comma-separated fault kinds, or "
                                       f"'all' / 'process'. Known: {ALL_KINDS}.")] = "all",
    quick: Annotated[bool, typer.Option("--quick", help="Short gaps and holds (gap 0.2-1 s, "
                                        "pause 3-6 s) instead of gap 5-15 s, pause 5-30 s.")
                     ] = False,
    partitions: Annotated[int, typer.Option("--partitions", min=1)] = 6,
    rate: Annotated[float, typer.Option("--rate", min=1.0,
                                        help="Records per second per producer.")] = 100.0,
    run_dir: Annotated[Path | None, typer.Option("--dir", help="Run directory (default: a "
                                                  "new temp dir).")] = None,
    broker_config: Annotated[list[str] | None, typer.Option(
        "--broker-config", metavar="KEY=VALUE",
        help="A broker setting over the campaign's (e.g. broker.session.timeout.ms=9000, "
             "the default users get). Repeatable.")] = None,
) -> None:
    """Start a local cluster, inject faults under load, heal, and check every acknowledged
    record (exit 0 only when every counter is zero)."""
    from strata.cli.chaos_campaign import CampaignConfig

    with reported_errors(ctx):
        wanted = parse_kinds(kinds)
        overrides = parse_settings(broker_config or [])
        netns_ok, why = (False, "no network-partition kind asked for")
        if any(k in NETWORK_KINDS for k in wanted):
            netns_ok, why = netns_available()
        playable, skipped = kinds_available(wanted, netns_ok)
        for line in skipped:
            print(f"skipping {line} ({why})", file=sys.stderr)
        if not playable:
            raise CliError("no playable fault kind left", exit_code=EXIT_USAGE)
        seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        workdir = run_dir or Path(tempfile.mkdtemp(prefix="strata-chaos-"))
        config = CampaignConfig(workdir=workdir.resolve(), seed=seed, faults=faults,
                                kinds=playable, brokers=brokers, partitions=partitions,
                                rate=rate, timing=QUICK_TIMING if quick else Timing(),
                                broker_config=overrides)
        print(f"seed {seed}; run directory {config.workdir}", file=sys.stderr)
        with progress(bar=True) as bar:
            task = bar.add_task("faults", total=faults)

            def say(line: str) -> None:
                bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
                if line.startswith("fault "):
                    bar.advance(task)

            try:
                if netns_ok:
                    from strata.cli.chaos_netns import network_campaign

                    report = network_campaign(config, say)
                else:
                    report = run_campaign(config, say=say)
            except (RuntimeError, OSError) as exc:  # set-up failed: no verdict to print
                raise CliError(f"the campaign could not run: {exc} (logs in "
                               f"{config.workdir})") from None
        report.skipped = skipped
        print_report(report)
        raise typer.Exit(0 if report.ok() else 1)
