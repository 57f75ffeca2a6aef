"""Throwaway peer servers for ``bench/suite.py``: Redis (``redis-server``) and NATS JetStream
(``nats-server -js``), each on a free 127.0.0.1 port with its data in its own temp dir.

Both are context managers: they start the server as a child process, wait (bounded) until it
answers, yield its address, and stop it by its PID when the block ends — also on an error or
Ctrl-C — with SIGTERM, then SIGKILL after a grace period. Nothing else is ever signalled: other
servers on this machine are not ours.

The binaries come from Debian (``make bench`` / ``make test`` install ``redis-server`` and
``nats-server`` where missing; Debian puts ``nats-server`` in ``/usr/sbin``).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (free unless someone races us for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(name: str) -> str:
    """``name`` on PATH, else in /usr/sbin or /usr/bin; raise with the make target to run."""
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise RuntimeError(f"{name} is not installed: run `make bench-deps` (Debian package)")


def _wait_listening(proc: subprocess.Popen[bytes], name: str, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
    raise RuntimeError(f"{name} did not start listening on 127.0.0.1:{port} "
                       f"(exit code {proc.poll()}):\n{tail}")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM this child by its PID, SIGKILL it after ``STOP_TIMEOUT_S``; reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _server(argv: Sequence[str], port: int, log_path: Path,
            pids: list[int] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(list(argv), stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        if pids is not None:
            pids.append(proc.pid)
        try:
            _wait_listening(proc, Path(argv[0]).name, port, log_path)
            yield proc
        finally:
            stop_process(proc)
            if pids is not None:
                pids.remove(proc.pid)


@contextlib.contextmanager
def redis_server(appendonly: bool, pids: list[int] | None = None) -> Iterator[tuple[str, int]]:
    """A redis-server at its default settings (RDB snapshots by Redis's default ``save`` rules,
    no AOF), or with ``appendonly yes`` + ``appendfsync everysec``; yields (host, port). Its PID
    is in ``pids`` while it runs."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="strata-bench-redis-") as tmp:
        argv = [find_binary("redis-server"), "--bind", "127.0.0.1", "--port", str(port),
                "--dir", tmp, "--protected-mode", "yes", "--daemonize", "no",
                "--appendonly", "yes" if appendonly else "no"]
        if appendonly:
            argv += ["--appendfsync", "everysec"]
        with _server(argv, port, Path(tmp) / "redis.log", pids):
            yield "127.0.0.1", port


@contextlib.contextmanager
def nats_server(pids: list[int] | None = None) -> Iterator[str]:
    """A nats-server with JetStream on (file storage in a temp dir); yields its ``nats://`` URL.
    Its PID is in ``pids`` while it runs."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="strata-bench-nats-") as tmp:
        argv = [find_binary("nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js",
                "-sd", str(Path(tmp) / "jetstream")]
        with _server(argv, port, Path(tmp) / "nats.log", pids):
            yield f"nats://127.0.0.1:{port}"
