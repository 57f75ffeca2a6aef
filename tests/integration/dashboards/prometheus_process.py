"""A real Prometheus (Debian's ``prometheus`` binary) as a child process, for dashboard tests.

Owns one server's lifecycle: a config scraping the given targets every second with the static
labels a Kubernetes scrape config would add (``namespace``, ``cluster``), its TSDB in a temp
dir, the web API on a free 127.0.0.1 port. ``start()`` polls ``/-/ready`` against a deadline;
``query()`` runs an instant PromQL query through the HTTP API; ``stop()`` sends SIGTERM to the
PID. Nothing sleeps to settle.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from ..broker_process import free_port
from ..process_control import log_tail, signal_and_wait

READY_TIMEOUT_S: Final = 30.0


class PrometheusProcess:
    def __init__(self, workdir: Path, targets: Sequence[str], labels: Mapping[str, str]) -> None:
        binary = shutil.which("prometheus")
        assert binary is not None, "prometheus is missing: `make test` installs Debian's"
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.config_path = workdir / "prometheus.yml"
        self.log_path = workdir / "prometheus.log"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "strata", "scrape_interval": "1s",
                                "scrape_timeout": "1s",
                                "static_configs": [{"targets": list(targets),
                                                    "labels": dict(labels)}]}],
        }
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config), encoding="utf-8")  # YAML ⊃ JSON
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, f"--config.file={self.config_path}",
                 f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}\n"
                                   f"{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/-/ready", timeout=2.0).status_code == 200:
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus not ready in {READY_TIMEOUT_S:.0f}s\n"
                                   f"{self.log_tail()}")
            time.sleep(0.05)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of an instant query (an error from Prometheus fails)."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10.0)
        body = response.json()
        assert body.get("status") == "success", f"{expr}: {body}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def label_values(self, label: str, match: str) -> list[str]:
        response = httpx.get(f"{self.url}/api/v1/label/{label}/values",
                             params={"match[]": match}, timeout=10.0)
        body = response.json()
        assert body.get("status") == "success", f"{label} {match}: {body}"
        return list(body["data"])

    def stop(self) -> int:
        process = self.process
        if process is None:
            return 0
        return signal_and_wait(process)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines, "(no prometheus log)")


@contextlib.contextmanager
def running_prometheus(workdir: Path, targets: Sequence[str],
                       labels: Mapping[str, str]) -> Iterator[PrometheusProcess]:
    server = PrometheusProcess(workdir, targets, labels)
    server.start()
    try:
        yield server
    finally:
        server.stop()
