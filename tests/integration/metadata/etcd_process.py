"""A real single-member etcd for the metadata contract suite: free loopback ports, a temp data
dir, started and stopped by PID (never by name).

The election timeout is shortened (heartbeat 50 ms, election 500 ms) so etcd's minimum lease
TTL is 1 s and the suite's leases can be short. ``restart`` kills the process (SIGKILL) and
starts a new one on the same data dir and ports: what a crashed etcd looks like to clients.

With ``tls`` (``EtcdTlsFiles``: PEM paths) the client URLs are https, etcd requires a client
certificate signed by ``tls.ca`` (``--client-cert-auth``) and ``url`` is ``etcds://``; with
``peer_tls`` too the peer URLs are https with the same files (``--peer-client-cert-auth``).

A member of a cluster: give each its ``name``, set every member's ``initial_cluster`` from
their ``peer_url`` once all are made, ``launch`` them all, then ``wait_healthy`` (a member is
healthy only once a quorum runs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..broker_process import free_port
from ..process_control import log_tail, signal_and_wait

STARTUP_TIMEOUT_S = 20.0

MISSING = (
    "etcd is not installed: `make test` installs Debian's etcd-server (make etcd); "
    "the metadata contract suite runs against a real etcd"
)


@dataclass(frozen=True)
class EtcdTlsFiles:
    """etcd's server certificate and the CA it trusts for client certificates; ``client_cert``
    and ``client_key`` (signed by ``ca``) are what its own health probe presents."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path


class EtcdProcess:
    def __init__(self, workdir: Path, tls: EtcdTlsFiles | None = None, *,
                 name: str = "strata-test", peer_tls: bool = False) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError(MISSING)
        self.binary = binary
        self.workdir = workdir
        self.tls = tls
        self.name = name
        self.peer_tls = peer_tls and tls is not None
        self.initial_cluster: str | None = None  # default: this member alone
        self.data_dir = workdir / "data"
        self.log_path = workdir / "etcd.log"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "etcds" if self.tls else "etcd"
        return f"{scheme}://127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"{'https' if self.peer_tls else 'http'}://127.0.0.1:{self.peer_port}"

    def start(self) -> None:
        self.launch()
        self.wait_healthy()

    def launch(self) -> None:
        client, peer = self.client_url, self.peer_url
        command = [
            self.binary,
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.initial_cluster or f'{self.name}={peer}'}",
            "--heartbeat-interval=50",
            "--election-timeout=500",
            "--logger=zap",
            "--log-level=warn",
        ]
        if self.tls:
            command += [
                f"--cert-file={self.tls.cert}",
                f"--key-file={self.tls.key}",
                "--client-cert-auth",
                f"--trusted-ca-file={self.tls.ca}",
            ]
        if self.tls and self.peer_tls:
            command += [
                f"--peer-cert-file={self.tls.cert}",
                f"--peer-key-file={self.tls.key}",
                "--peer-client-cert-auth",
                f"--peer-trusted-ca-file={self.tls.ca}",
            ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def wait_healthy(self) -> None:
        client = self.client_url
        context = None
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.tls.ca))
            context.load_cert_chain(str(self.tls.client_cert), str(self.tls.client_key))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"etcd exited with {code}:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(
                    f"{client}/health", timeout=0.5, context=context
                ) as response,
            ):
                if b'"health":"true"' in response.read():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"etcd not healthy within {STARTUP_TIMEOUT_S} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL by PID and reap."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """SIGTERM by PID (SIGKILL after 10 s) and reap."""
        if self.process is not None:
            signal_and_wait(self.process, timeout=10)
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines, "(no etcd log)")


@contextlib.contextmanager
def running_etcd(workdir: Path, tls: EtcdTlsFiles | None = None) -> Iterator[EtcdProcess]:
    etcd = EtcdProcess(workdir, tls)
    try:
        etcd.start()
        yield etcd
    finally:
        etcd.stop()
