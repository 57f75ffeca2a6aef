"""A real Strata broker as a child process, for tests that talk to it over loopback.

Owns one broker's lifecycle: its config file, data directory, ports and log file, and the
process started from them (``python -m strata.broker --config FILE``, the same entry point
operators use). Nothing here sleeps to "let things settle": every wait polls a condition
against a deadline and, when the deadline passes, fails with the broker's log attached.

Lifecycle::

    BrokerProcess(workdir)          ports picked, nothing started
      .start()                      spawn, then poll GET /readyz until 200 (or the process dies)
      .stop()   -> exit code        SIGTERM, wait; SIGKILL if it outlives the deadline
      .kill()   -> exit code        SIGKILL at once (a crash: nothing flushed, nothing closed)
      .start()                      again: same ports, same log.dirs, log appended to

Ports: ``free_port`` binds port 0 on 127.0.0.1 and releases it; another process could take it in
between, which the readiness wait then reports as an early exit with the broker's own error.
A restarted broker reuses its ports (the broker's listener sets ``SO_REUSEADDR``, as asyncio's
``start_server`` does by default).

Only the test that owns a ``BrokerProcess`` calls it; it has no locks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from .process_control import signal_and_wait

READY_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 20.0
KILL_TIMEOUT_S: Final = 10.0
POLL_INTERVAL_S: Final = 0.05
LOG_TAIL_LINES: Final = 80

# The settings every test broker gets; a test adds or overrides keys with ``overrides``.
BASE_CONFIG: Final[Mapping[str, str]] = {
    "node.id": "1",
    "num.partitions": "3",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
}

# Added by tests that use consumer groups on a lone broker: the first rebalance does not wait
# for more members, and ``__consumer_offsets`` is small (2 partitions, 1 replica).
GROUPS_CONFIG: Final[Mapping[str, str]] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
}


STRATA: Final = Path(sys.executable).parent / "strata"
"""The ``strata`` command of this virtualenv."""


def create_user(user: str, password: str, *where: str) -> None:
    """``strata users create`` (the real CLI) where ``where`` says (``--log-dir DIR``, a
    metadata store), failing with its output."""
    done = subprocess.run([str(STRATA), "users", "create", user, "--password", password, *where],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"strata users create: {done.stdout}{done.stderr}"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, and never handed out before in this
    test run: the kernel may give a released ephemeral port to the next caller at once, and two
    brokers configured with the same port (one's Kafka listener, another's HTTP port) would
    fail in ways that have nothing to do with what a test checks."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class BrokerStartError(RuntimeError):
    """The broker exited or did not become ready in time; the message holds its log tail."""


class BrokerProcess:
    """One broker: config, data and log under ``workdir``; Kafka and HTTP ports on loopback."""

    # Every instance created in this test session, so a failing test's report can show their logs.
    instances: list[BrokerProcess] = []

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.http_port = free_port()
        self.data_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log_path = workdir / "broker.log"
        self.config: dict[str, str] = {
            **BASE_CONFIG,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "http.port": str(self.http_port),
            **(overrides or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        BrokerProcess.instances.append(self)

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # ------------------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Spawn the broker and return once ``/readyz`` answers 200."""
        if self.is_running():
            raise RuntimeError(f"broker pid {self.pid} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in self.config.items()), encoding="utf-8"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env["PYTHONUNBUFFERED"] = "1"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts}: {self.config_path} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "strata.broker", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,  # a Ctrl-C of pytest is not delivered to the broker too
            )
        self._wait_ready(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait; SIGKILL after ``timeout``. Returns the exit code (negative = signal).

        The exit code tells a graceful shutdown (0) from one that needed SIGKILL (-9).
        """
        return self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL at once, like a crash; returns the exit code (-9)."""
        return self._signal_and_wait(signal.SIGKILL, KILL_TIMEOUT_S)

    def restart(self, *, hard: bool = False) -> int:
        """Stop (SIGTERM, or SIGKILL if ``hard``) and start again; returns the stop's exit code."""
        code = self.kill() if hard else self.stop()
        self.start()
        return code

    def _signal_and_wait(self, sig: signal.Signals, timeout: float) -> int:
        process = self.process
        if process is None:
            raise RuntimeError("broker was never started")
        return signal_and_wait(process, sig, timeout)  # by PID: never its process group

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.http_port}/readyz"
        last = "no answer yet"
        while True:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                raise BrokerStartError(
                    f"broker exited with code {code} before it was ready\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1.0) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:  # 503 while loading
                last = f"HTTP {exc.code}"
            except (OSError, urllib.error.URLError) as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(
                    f"broker not ready after {timeout:.0f}s (GET /readyz: {last})\n"
                    f"{self.log_tail()}"
                )
            time.sleep(POLL_INTERVAL_S)

    # ------------------------------------------------------------------------------ diagnostics
    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the broker's log, headed by where the whole log is."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return f"(no broker log at {self.log_path})"
        tail = text.splitlines()[-lines:]
        return f"--- {self.log_path} (last {len(tail)} lines) ---\n" + "\n".join(tail)


@contextlib.contextmanager
def serving(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """Start a broker a test has configured; stop it with SIGTERM on exit, however the block
    ends. A shutdown that is not clean (exit code other than 0) fails."""
    broker.start()
    try:
        yield broker
    finally:
        code = broker.stop()
    assert code == 0, f"broker did not shut down cleanly ({code})\n{broker.log_tail()}"


@contextlib.contextmanager
def running_broker(
    workdir: Path, overrides: Mapping[str, str] | None = None
) -> Iterator[BrokerProcess]:
    """A started broker, stopped with SIGTERM on exit; a shutdown that is not clean fails."""
    broker = BrokerProcess(workdir, overrides)
    broker.start()
    try:
        yield broker
    except BaseException:
        broker.stop()
        raise
    if broker.is_running():
        code = broker.stop()
        if code != 0:
            raise AssertionError(
                f"broker did not shut down cleanly on SIGTERM (exit code {code})\n"
                f"{broker.log_tail()}"
            )
