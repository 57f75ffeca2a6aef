"""``strata admin`` as a child process, for tests that talk to it over loopback with httpx.

Owns one admin service's lifecycle: a free port on 127.0.0.1, its log file, and the process
started from the real entry point (``python -m strata.cli.main admin`` ≡ ``strata admin``).
``start()`` polls ``/healthz`` (the process serves HTTP) and, if ``wait_ready``, ``/readyz``
(a broker answers) against a deadline; nothing sleeps to settle. ``stop()`` sends SIGTERM to
the PID and returns the exit code (0 after uvicorn's graceful shutdown). ``args`` and ``env``
add options and ``STRATA_*`` variables (security tests); with ``ca`` set the service is
reached over HTTPS and its certificate checked against that CA file (``client_cert``: the
certificate and key the probes present when the service asks for one).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import httpx

from ..broker_process import free_port
from ..process_control import signal_and_wait

START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 20.0


class AdminProcess:
    def __init__(self, workdir: Path, bootstrap: str, timeout_s: float = 10.0,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 ca: Path | None = None, client_cert: tuple[Path, Path] | None = None
                 ) -> None:
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.args = list(args)
        self.extra_env = dict(env or {})
        self.ca = ca
        self.client_cert = client_cert
        self.port = free_port()
        self.log_path = workdir / "admin.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ca is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: the test CA over HTTPS (and the client certificate, if any)."""
        if self.ca is None:
            return True
        context = ssl.create_default_context(cafile=str(self.ca))
        if self.client_cert is not None:
            context.load_cert_chain(str(self.client_cert[0]), str(self.client_cert[1]))
        return context

    def start(self, wait_ready: bool = True) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env["STRATA_BOOTSTRAP_SERVERS"] = self.bootstrap  # the env route, as pods use it
        env.update(self.extra_env)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from strata.cli.main import app; app()", "admin",
                 "--host", "127.0.0.1", "--port", str(self.port),
                 "--timeout", str(self.timeout_s), *self.args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, env=env, start_new_session=True)
        self._wait("/healthz")
        if wait_ready:
            self._wait("/readyz")

    def _wait(self, path: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last = "no answer yet"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"strata admin exited with {self.process.returncode}\n"
                                   f"{self.log_tail()}")
            try:
                response = httpx.get(self.url + path, timeout=5.0, verify=self.verify)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"GET {path} not 200 after {START_TIMEOUT_S:.0f}s ({last})\n"
                           f"{self.log_tail()}")

    def stop(self) -> int:
        process = self.process
        if process is None:
            raise RuntimeError("never started")
        return signal_and_wait(process, timeout=STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no admin log)"
        return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def running_admin(workdir: Path, bootstrap: str, *, wait_ready: bool = True,
                  timeout_s: float = 10.0, args: Sequence[str] = (),
                  env: Mapping[str, str] | None = None,
                  ca: Path | None = None) -> Iterator[AdminProcess]:
    """A started admin service; a shutdown on SIGTERM that is not clean fails."""
    admin = AdminProcess(workdir, bootstrap, timeout_s, args, env, ca)
    admin.start(wait_ready)
    try:
        yield admin
    finally:
        code = admin.stop()
    if code != 0:
        raise AssertionError(f"strata admin exited with {code} on SIGTERM\n{admin.log_tail()}")
