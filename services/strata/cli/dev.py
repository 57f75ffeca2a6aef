"""``strata dev``: a local Strata cluster on this machine (what ``make run`` starts).

Owns the launcher only: it writes one properties file per broker under ``--data-dir``, starts
each broker as a child process (``python -m strata.broker --config FILE``), and supervises them.
Contract (docs/architecture.md, "Processes"; scripts and tests rely on it):

* one line containing the word ``bootstrap`` followed by the Kafka bootstrap address
  (``127.0.0.1:9092,127.0.0.1:9093,...``), printed before the brokers start;
* then one line starting with ``READY`` only when every broker answers ``/readyz``, every
  broker is registered, there is a controller, every partition of the internal topics has
  a leader and the REST admin service (``--admin-port``, default 8080; 0 = a free port, -1 =
  none) answers its ``/readyz``;
* SIGINT and SIGTERM handlers are installed explicitly (so Ctrl-C works even when the parent
  shell ignored SIGINT, as for background jobs); either one stops every child within
  ``STOP_GRACE_S`` (SIGTERM, then SIGKILL) and the launcher exits 0;
* if a broker dies on its own, the launcher stops the others and exits 1 naming it and the
  tail of its log.

Broker i listens on ``--kafka-port + i`` (node id i) and logs to ``<data-dir>/broker-<i>.log``.
The brokers form one cluster on a metadata store: ``--metadata sqlite`` (the default:
``<data-dir>/meta.db``, no server) or ``--metadata etcd`` (a local single-member etcd the
launcher starts on free ports, data in ``<data-dir>/etcd``, stopped after the brokers).
``--brokers N`` (default 3) caps ``default.replication.factor``,
``offsets.topic.replication.factor`` and ``transaction.state.log.replication.factor`` at N
(and ``transaction.state.log.min.isr`` at min(2, N)).

Broker settings: ``-o key=value`` (``--override``, repeatable) sets a broker config of every
broker, by Kafka's name, over the launcher's own choices; the keys the launcher sets per broker
to keep its contract (``LAUNCHER_KEYS``: node id, listeners, data and HTTP ports, metadata
store, rack) are refused. ``--racks a,b,c`` gives broker i ``broker.rack`` = the i-th rack,
round-robin when there are fewer racks than brokers (so replicas spread over racks, KIP-36). A
malformed option is refused before anything starts (exit 2).
``broker_properties`` and ``parse_dev_settings`` are pure (no I/O) so tests can check the
generated configuration.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

STOP_GRACE_S = 30.0
READY_TIMEOUT_S = 120.0
DEFAULT_BROKERS = 3
DEFAULT_ADMIN_PORT = 8080
INTERNAL_TOPICS = ("__consumer_offsets",)
LAUNCHER_KEYS = frozenset({
    "node.id", "broker.id", "listeners", "advertised.listeners", "log.dirs", "log.dir",
    "http.port", "metadata.store", "broker.rack",
})


@dataclass(frozen=True)
class DevSettings:
    """What ``-o`` and ``--racks`` add to the brokers' properties."""

    overrides: Mapping[str, str]
    racks: tuple[str, ...] = ()

    def rack_of(self, node_id: int) -> str | None:
        return self.racks[node_id % len(self.racks)] if self.racks else None


def parse_dev_settings(overrides: Sequence[str], racks: str | None) -> DevSettings:
    """``-o`` items and the ``--racks`` list; ``ValueError`` naming the bad one."""
    parsed: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"-o {item!r} is not key=value")
        if key in LAUNCHER_KEYS:
            raise ValueError(f"-o {key}: set by strata dev for each broker"
                             + (" (use --racks)" if key == "broker.rack" else ""))
        parsed[key] = value.strip()
    rack_list: tuple[str, ...] = ()
    if racks is not None:
        rack_list = tuple(r.strip() for r in racks.split(","))
        if not all(rack_list):
            raise ValueError(f"--racks {racks!r}: expected rack names separated by commas")
    return DevSettings(parsed, rack_list)


@dataclass(frozen=True)
class DevBroker:
    node_id: int
    kafka_port: int
    http_port: int
    data_dir: Path
    config_path: Path
    log_path: Path


def broker_properties(
    node_id: int, kafka_port: int, http_port: int, log_dir: Path, brokers: int,
    extra: Mapping[str, str] | None = None, *, metadata_store: str | None = None,
    rack: str | None = None,
) -> dict[str, str]:
    """The properties of dev broker ``node_id`` (Kafka's names); ``metadata_store`` is the
    cluster's ``metadata.store`` URL, ``extra`` the ``-o`` settings, ``rack`` its
    ``broker.rack``."""
    props = {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}",
        "log.dirs": str(log_dir),
        "http.port": str(http_port),
        "num.partitions": "1",
        "default.replication.factor": str(min(3, brokers)),
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "auto.create.topics.enable": "true",
    }
    if metadata_store:
        props["metadata.store"] = metadata_store
    if rack is not None:
        props["broker.rack"] = rack
    props.update(extra or {})
    return props


def format_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass(frozen=True)
class DevAdmin:
    """The REST admin service of the dev cluster (``python -m strata.admin``)."""

    port: int
    log_path: Path


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)  # Ctrl-C reaches the launcher only


class DevCluster:
    """Starts, watches and stops the child brokers and the admin service."""

    def __init__(self, brokers: list[DevBroker], admin: DevAdmin | None = None) -> None:
        self.brokers = brokers
        self.admin = admin
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.admin_proc: subprocess.Popen[bytes] | None = None
        self.stop_requested = threading.Event()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.kafka_port}" for b in self.brokers)

    def start(self) -> None:
        for b in self.brokers:
            b.data_dir.mkdir(parents=True, exist_ok=True)
            self.procs[b.node_id] = _spawn(
                [sys.executable, "-m", "strata.broker", "--config", str(b.config_path)],
                b.log_path)
        if self.admin is not None:
            self.admin_proc = _spawn(
                [sys.executable, "-m", "strata.admin", "--bootstrap-servers", self.bootstrap,
                 "--host", "127.0.0.1", "--port", str(self.admin.port)], self.admin.log_path)

    def dead(self) -> tuple[str, Path] | None:
        """The first child that exited: (what it was, its log)."""
        for b in self.brokers:
            if self.procs[b.node_id].poll() is not None:
                return f"broker {b.node_id}", b.log_path
        if self.admin is not None and self.admin_proc is not None \
                and self.admin_proc.poll() is not None:
            return "the admin service", self.admin.log_path
        return None

    def wait_ready(self, timeout_s: float, cluster_ready: Callable[[], bool]) -> bool:
        """Until every broker answers ``/readyz`` and then ``cluster_ready()`` holds."""
        deadline = time.monotonic() + timeout_s
        pending = {b.node_id: b for b in self.brokers}
        while time.monotonic() < deadline and not self.stop_requested.is_set():
            if self.dead() is not None:
                return False
            for node_id, b in list(pending.items()):
                if _ready(b.http_port):
                    del pending[node_id]
            if not pending and cluster_ready() and (
                    self.admin is None or _ready(self.admin.port)):
                return True
            self.stop_requested.wait(0.1)
        return False

    def stop(self) -> None:
        procs = list(self.procs.values())
        if self.admin_proc is not None:
            procs.append(self.admin_proc)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def etcd_command(data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    """A single-member local etcd (Debian's ``etcd``) on loopback; transactions may hold as many
    ops as a topic has partitions."""
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return ["etcd", "--name=strata-dev", f"--data-dir={data_dir}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=strata-dev={peer}", "--max-txn-ops=100000",
            "--logger=zap", "--log-level=warn"]


def _etcd_healthy(client_port: int) -> bool:
    try:
        url = f"http://127.0.0.1:{client_port}/health"
        with urllib.request.urlopen(url, timeout=1) as resp:
            return b'"health":"true"' in resp.read()
    except (urllib.error.URLError, OSError):
        return False


def cluster_ready(bootstrap: str, brokers: int) -> bool:
    """Every broker registered, a controller, every internal topic partition led."""
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(
            timeout=2)
    except Exception:  # noqa: BLE001 - KafkaException and friends: not ready yet
        return False
    if len(metadata.brokers) < brokers or (brokers > 1 and metadata.controller_id < 0):
        return False
    for name in INTERNAL_TOPICS:
        topic = metadata.topics.get(name)
        if topic is not None and any(p.leader < 0 for p in topic.partitions.values()):
            return False
    return True


def run_dev(brokers: int, data_dir: Path, kafka_port: int, metadata: str = "sqlite",
            admin_port: int = DEFAULT_ADMIN_PORT, overrides: Sequence[str] = (),
            racks: str | None = None) -> int:
    """Run the local cluster until SIGINT/SIGTERM; the process exit code."""
    try:
        settings = parse_dev_settings(overrides, racks)
    except ValueError as exc:
        print(f"strata dev: {exc}", file=sys.stderr)
        return 2
    if brokers < 1:
        print("strata dev: --brokers must be at least 1", file=sys.stderr)
        return 2
    if metadata not in ("sqlite", "etcd"):
        print(f"strata dev: --metadata {metadata}: expected sqlite or etcd", file=sys.stderr)
        return 2
    if metadata == "etcd" and shutil.which("etcd") is None:
        print("strata dev: --metadata etcd needs the etcd binary (Debian: apt-get install "
              "etcd-server)", file=sys.stderr)
        return 2
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    etcd: subprocess.Popen[bytes] | None = None
    if metadata == "etcd":
        client_port, peer_port = free_port(), free_port()
        store_url = f"etcd://127.0.0.1:{client_port}"
        with (data_dir / "etcd.log").open("ab") as etcd_log:
            etcd = subprocess.Popen(etcd_command(data_dir / "etcd", client_port, peer_port),
                                    stdout=etcd_log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while not _etcd_healthy(client_port):
            if etcd.poll() is not None or time.monotonic() > deadline:
                print(f"strata dev: etcd did not start; see {data_dir / 'etcd.log'}",
                      file=sys.stderr)
                etcd.kill()
                return 1
            time.sleep(0.05)
    else:
        store_url = f"sqlite:///{data_dir / 'meta.db'}"
    members = []
    for i in range(brokers):
        http_port = free_port()
        node_dir = data_dir / f"broker-{i}"
        config_path = data_dir / f"broker-{i}.properties"
        props = broker_properties(i, kafka_port + i, http_port, node_dir / "logs", brokers,
                                  settings.overrides, metadata_store=store_url,
                                  rack=settings.rack_of(i))
        config_path.write_text(format_properties(props))
        members.append(DevBroker(i, kafka_port + i, http_port, node_dir, config_path,
                                 data_dir / f"broker-{i}.log"))
    admin = DevAdmin(admin_port or free_port(), data_dir / "admin.log") if admin_port >= 0 \
        else None
    cluster = DevCluster(members, admin)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        cluster.stop_requested.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    bootstrap = ",".join(f"127.0.0.1:{b.kafka_port}" for b in members)
    # The address comes first, right after the word: a path may contain "bootstrap" too.
    admin_note = f", admin API http://127.0.0.1:{admin.port}" if admin else ""
    print(f"bootstrap {bootstrap} (Strata dev cluster, {brokers} broker(s), metadata on "
          f"{store_url}{admin_note}, data in {data_dir})", flush=True)
    if admin is not None:
        print(f"console http://127.0.0.1:{admin.port}/console/ (the web console)", flush=True)
    cluster.start()
    try:
        if not cluster.wait_ready(READY_TIMEOUT_S, lambda: cluster_ready(bootstrap, brokers)):
            if cluster.stop_requested.is_set():
                return 0
            failed = cluster.dead()
            what = f"{failed[0]} exited" if failed else "the cluster did not get ready"
            log = failed[1] if failed else members[0].log_path
            print(f"strata dev: {what}; last lines of {log}:\n{_tail(log)}", file=sys.stderr)
            return 1
        print(f"READY bootstrap {bootstrap} (Ctrl-C stops the cluster)", flush=True)
        while not cluster.stop_requested.wait(0.5):
            failed = cluster.dead()
            if failed is not None:
                print(f"strata dev: {failed[0]} exited; last lines of "
                      f"{failed[1]}:\n{_tail(failed[1])}", file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()
        if etcd is not None:
            etcd.terminate()
            try:
                etcd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                etcd.kill()
                etcd.wait()
        print("Strata dev cluster stopped", flush=True)


def default_data_dir() -> Path:
    return Path(os.environ.get("STRATA_DATA_DIR", ".strata-data"))
