"""The fault campaign's cluster: N ``strata broker`` processes on one metadata store.

Owns the brokers' processes (started, signalled and reaped by PID only: never a process group,
never by name), their properties (``dev.broker_properties`` plus the campaign's short timeouts,
``min.insync.replicas=2`` and unclean election off), their data directories under the run
directory, and the client-side view of the cluster (confluent-kafka Metadata) the nemesis uses
to pick its victims. ``tests/integration/broker_process.py`` does the same job for tests, but
tests are not installed and ``strata chaos run`` must work from the package, so this module
reuses ``strata.cli.dev`` (properties, free ports, readiness) instead.

A broker may run inside a network namespace (``ip netns exec NS``, which execs, so the PID is
the broker's): then it listens on its namespace's address and the root namespace reaches it
over the veth links of ``chaos_netns``.

States a broker goes through: stopped → running (``start``: spawn, poll ``/readyz``) →
{killed (SIGKILL), terminated (SIGTERM, waited), paused (SIGSTOP) → running (SIGCONT)} →
running again. Every wait polls against a deadline; nothing sleeps to "let things settle".
``close`` kills whatever is still running (resuming paused ones first), on success or failure.
Only the campaign thread calls into a ``ChaosCluster``; it has no locks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strata.cli.dev import broker_properties, format_properties, free_port

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_S = 0.1

# Short timeouts so faults play out in seconds (the scale of tests/integration/cluster), except
# the broker session: users' default 9 s, so a broker killed and restarted within a few seconds
# re-registers while its previous incarnation's lease still holds. That is the window where
# leadership-safety bugs live: on 3f6d80a, ~50 kill-all/term-all faults with a 3 s session lost
# nothing, while 20 faults with 9 s lost 408 acknowledged records (docs/chaos.md).
CAMPAIGN_CONFIG: Mapping[str, str] = {
    "broker.session.timeout.ms": "9000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "log.segment.bytes": str(1 << 20),
}


@dataclass(frozen=True)
class PartitionState:
    """One partition as a client's Metadata shows it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ClusterView:
    """What one Metadata answer said: registered brokers, controller, the topic's partitions."""

    brokers: frozenset[int]
    controller: int
    partitions: Mapping[int, PartitionState]


class BrokerStartError(RuntimeError):
    """A broker exited or did not answer ``/readyz`` in time; the message holds its log tail."""


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return f"--- {path} ---\n" + "\n".join(text.splitlines()[-lines:])


class ChaosBroker:
    """One broker process: config, data and log under ``workdir``."""

    def __init__(self, node_id: int, workdir: Path, host: str, store_url: str, brokers: int,
                 overrides: Mapping[str, str] | None = None, netns: str | None = None) -> None:
        self.node_id = node_id
        self.workdir = workdir
        self.host = host
        self.netns = netns
        self.port = free_port()
        self.http_port = free_port()
        self.data_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log_path = workdir / "broker.log"
        self.config = broker_properties(
            node_id, self.port, self.http_port, self.data_dir, brokers,
            {**CAMPAIGN_CONFIG, **(overrides or {})}, metadata_store=store_url)
        self.config["listeners"] = f"PLAINTEXT://{host}:{self.port}"
        self.config["advertised.listeners"] = f"PLAINTEXT://{host}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self) -> None:
        """Start the process (not waiting for readiness)."""
        if self.is_running():
            raise RuntimeError(f"broker {self.node_id} (pid {self.pid}) is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(format_properties(self.config), encoding="utf-8")
        command = [sys.executable, "-m", "strata.broker", "--config", str(self.config_path)]
        if self.netns is not None:
            command = ["ip", "netns", "exec", self.netns, *command]
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env["PYTHONUNBUFFERED"] = "1"
        self.starts += 1
        self.paused = False
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')} "
                      f"=====\n".encode())
            log.flush()
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=self.workdir, env=env,
                                            start_new_session=True)

    def ready(self) -> bool:
        try:
            url = f"http://{self.host}:{self.http_port}/readyz"
            with urllib.request.urlopen(url, timeout=1.0) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.is_running():
                raise BrokerStartError(f"broker {self.node_id} exited with code "
                                       f"{self.process.returncode if self.process else None}"
                                       f"\n{log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise BrokerStartError(f"broker {self.node_id} not ready after {timeout:.0f} s"
                                       f"\n{log_tail(self.log_path)}")
            time.sleep(POLL_S)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to this broker's PID (only while it runs)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(STOP_TIMEOUT_S)
        self.paused = False

    def terminate(self, timeout: float = STOP_TIMEOUT_S, *, send: bool = True) -> int | None:
        """SIGTERM (unless ``send`` is False: already sent) and wait, SIGKILL after
        ``timeout``; the exit code (0: a clean shutdown)."""
        if self.process is None:
            return None
        if self.paused:
            self.signal(signal.SIGCONT)
        if send:
            self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.process.returncode


class ChaosCluster:
    """The brokers of one campaign and the client-side view of them."""

    def __init__(self, workdir: Path, store_url: str, brokers: int,
                 hosts: Mapping[int, str] | None = None,
                 netns: Mapping[int, str] | None = None,
                 overrides: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.store_url = store_url
        self.brokers = {
            i: ChaosBroker(i, workdir / f"broker-{i}", (hosts or {}).get(i, "127.0.0.1"),
                           store_url, brokers, overrides, (netns or {}).get(i))
            for i in range(brokers)}
        self._admin: tuple[str, Any] | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start_all(self, timeout: float = READY_TIMEOUT_S) -> None:
        for broker in self.brokers.values():
            if not broker.is_running():
                broker.spawn()
        for broker in self.brokers.values():
            broker.wait_ready(timeout)

    def close(self) -> None:
        """Kill every broker still running (paused ones are resumed first): by PID."""
        for broker in self.brokers.values():
            if broker.is_running():
                broker.signal(signal.SIGCONT)
                broker.kill()

    def stop_all(self) -> dict[int, int | None]:
        """SIGTERM every broker at once, then wait for each; exit codes by node id."""
        for broker in self.brokers.values():
            if broker.is_running():
                if broker.paused:
                    broker.signal(signal.SIGCONT)
                broker.signal(signal.SIGTERM)
        return {i: b.terminate(send=False) for i, b in self.brokers.items()}

    # ----------------------------------------------------------------------- client view
    def _live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values()
                        if b.is_running() and not b.paused)

    def view(self, topic: str | None, timeout: float = 3.0) -> ClusterView | None:
        """One Metadata answer from a running, unpaused broker; ``None`` when none answers."""
        from confluent_kafka.admin import AdminClient

        bootstrap = self._live_bootstrap()
        if not bootstrap:
            return None
        if self._admin is None or self._admin[0] != bootstrap:
            self._admin = (bootstrap, AdminClient({"bootstrap.servers": bootstrap,
                                                   "log_level": 0,
                                                   "socket.timeout.ms": 3000}))
        try:
            metadata = self._admin[1].list_topics(topic=topic, timeout=timeout)
        except Exception:  # noqa: BLE001 - KafkaException of a dying broker: no view now
            return None
        partitions: dict[int, PartitionState] = {}
        meta = metadata.topics.get(topic) if topic else None
        if meta is not None and meta.error is None:
            partitions = {i: PartitionState(p.leader, tuple(p.replicas), tuple(p.isrs))
                          for i, p in meta.partitions.items()}
        return ClusterView(frozenset(metadata.brokers), int(metadata.controller_id), partitions)

    def registered(self) -> bool:
        """Every broker registered and a controller elected."""
        view = self.view(None)
        return view is not None and len(view.brokers) >= len(self.brokers) \
            and view.controller >= 0

    def healthy(self, topic: str, partitions: int, *, full_isr: bool = False) -> bool:
        """Every broker registered, a controller, every partition led by a registered broker
        (and with ``full_isr``, every replica in the ISR)."""
        view = self.view(topic)
        if view is None or len(view.brokers) < len(self.brokers) or view.controller < 0:
            return False
        if len(view.partitions) < partitions:
            return False
        for state in view.partitions.values():
            if state.leader not in view.brokers:
                return False
            if full_isr and set(state.isr) != set(state.replicas):
                return False
        return True

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float) -> bool:
        """Poll ``condition`` until it holds (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S * 2)
        return True

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str]) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self._live_bootstrap(), "log_level": 0})
        futures = admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                                config=dict(config))])
        futures[topic].result(timeout=30)
        if not self.wait_for(lambda: self.healthy(topic, partitions, full_isr=True),
                             f"{topic} led and fully replicated", 60):
            raise RuntimeError(f"topic {topic} did not get leaders and full ISRs in 60 s")
