"""The operator exactly as deployed, as a child process: ``kopf run -A --standalone -m
strata.operator.main`` with KUBECONFIG pointing at the mock API server, plus the
``STRATA_OPERATOR_*`` settings a test scales down (reconcile every second, 1 s Kafka timeout,
the test broker's bootstrap). Stopped by PID with SIGTERM (SIGKILL after a deadline); its log
is kept for failure reports. ``wait_until`` is the one polling helper of these tests.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from ..broker_process import free_port
from ..process_control import signal_and_wait

T = TypeVar("T")

POLL_S = 0.1


def wait_until(probe: Callable[[], T | None], timeout: float, what: str,
               log: Callable[[], str] = lambda: "") -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(POLL_S)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} "
                         f"(last: {last!r})\n{log()}")


STANDALONE = ("-A", "--standalone")


class OperatorProcess:
    def __init__(self, workdir: Path, kubeconfig: Path, env: Mapping[str, str],
                 mode: tuple[str, ...] = STANDALONE) -> None:
        """``mode``: kopf's scope and peering options (the chart's replicas use
        ``("-A", "--peering=<name>")``)."""
        self.log_path = workdir / "operator.log"
        self.kubeconfig = kubeconfig
        self.env = dict(env)
        self.mode = mode
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_port = free_port()
        self.health_port = free_port()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env.update({"KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1",
                    "STRATA_OPERATOR_RECONCILE_INTERVAL": "1",
                    "STRATA_OPERATOR_KAFKA_TIMEOUT": "1",
                    "STRATA_OPERATOR_METRICS_PORT": str(self.metrics_port), **self.env})
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", *self.mode,
                 f"--liveness=http://127.0.0.1:{self.health_port}/healthz",
                 "-m", "strata.operator.main"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)

    def stop(self, timeout: float = 20.0) -> int | None:
        process = self.process
        if process is None:
            return None
        return signal_and_wait(process, timeout=timeout)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no operator log)"
        tail = [line for line in text.splitlines() if "Timer '" not in line][-lines:]
        return f"--- {self.log_path} (last {len(tail)} lines) ---\n" + "\n".join(tail)


@contextlib.contextmanager
def running_operator(workdir: Path, kubeconfig: Path, env: Mapping[str, str],
                     mode: tuple[str, ...] = STANDALONE) -> Iterator[OperatorProcess]:
    operator = OperatorProcess(workdir, kubeconfig, env, mode)
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()
