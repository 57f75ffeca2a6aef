"""``strata dev``: the contract scripts rely on (docs/architecture.md) — a ``bootstrap`` line, then
``READY`` once the (3-broker) cluster serves; SIGINT/SIGTERM stop every child, even when the
launcher was started with SIGINT ignored (as a background job is)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from strata.cli.dev import broker_properties

pytestmark = pytest.mark.integration

STRATA = Path(sys.executable).with_name("strata")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (the dev cluster's brokers use port + i),
    below the kernel's ephemeral range so no client connection takes one meanwhile."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - count)
        try:
            with contextlib.ExitStack() as stack:
                for i in range(count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", base + i))
        except OSError:
            continue
        return base
    raise AssertionError(f"no {count} consecutive free ports")


def read_line_with(proc: subprocess.Popen[str], word: str, deadline: float) -> str:
    assert proc.stdout is not None
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if word in line:
            return line
        seen.append(line)
    raise AssertionError(f"no line with {word!r} before the deadline (exit {proc.poll()}); "
                         f"the launcher printed:\n{''.join(seen)}")


def broker_pids(data_dir: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"strata.broker --config {data_dir}"],
                         capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]


def admin_pids(kafka_port: int) -> list[int]:
    pattern = f"strata.admin --bootstrap-servers 127.0.0.1:{kafka_port},"
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]


def cleanup(proc: subprocess.Popen[str], data_dir: Path, kafka_port: int) -> None:
    """Whatever a failed test left running: the launcher, then its brokers and admin service,
    by PID."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in broker_pids(data_dir) + admin_pids(kafka_port):
        os.kill(pid, signal.SIGKILL)
    if proc.stdout is not None:
        proc.stdout.close()


def api_versions_answers(port: int) -> bool:
    request = bytes.fromhex("00120000") + (7).to_bytes(4, "big") + b"\x00\x04test"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(len(request).to_bytes(4, "big") + request)
        size = int.from_bytes(s.recv(4), "big")
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
    return body[:4] == (7).to_bytes(4, "big") and body[4:6] == b"\x00\x00"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_dev_prints_bootstrap_then_ready_and_stops_cleanly(tmp_path: Path, stop: int) -> None:
    port = free_ports(3)
    admin_port = free_port()
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [str(STRATA), "dev", "--data-dir", str(data_dir), "--kafka-port", str(port),
         "--admin-port", str(admin_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # A background job's SIGINT is ignored; the launcher must install its own handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 90
        line = read_line_with(proc, "bootstrap", deadline)
        expected = ",".join(f"127.0.0.1:{port + i}" for i in range(3))
        assert line.split("bootstrap", 1)[1].split()[0] == expected
        ready = read_line_with(proc, "READY", deadline)
        assert ready.startswith("READY")
        assert all(api_versions_answers(port + i) for i in range(3))
        assert len(broker_pids(data_dir)) == 3
        status = subprocess.run([str(STRATA), "cluster", "status", "-b", f"127.0.0.1:{port}"],
                                capture_output=True, text=True, timeout=60, check=True)
        assert "3 brokers" in status.stdout
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/v1/cluster",
                                    timeout=10) as response:
            cluster = json.load(response)
        assert sorted(b["id"] for b in cluster["brokers"]) == [0, 1, 2]
        assert cluster["controller"] in (0, 1, 2)
        proc.send_signal(stop)
        assert proc.wait(timeout=40) == 0
        assert broker_pids(data_dir) == []
        assert admin_pids(port) == []
        for i in range(3):
            assert (data_dir / f"broker-{i}" / "logs" / ".kafka_cleanshutdown").exists()
    finally:
        cleanup(proc, data_dir, port)


def test_dev_on_etcd_starts_and_stops_a_local_etcd(tmp_path: Path) -> None:
    port = free_ports(2)
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [str(STRATA), "dev", "--metadata", "etcd", "--brokers", "2", "--data-dir", str(data_dir),
         "--kafka-port", str(port), "--admin-port", "-1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        line = read_line_with(proc, "bootstrap", deadline)
        assert "metadata on etcd://127.0.0.1:" in line
        read_line_with(proc, "READY", deadline)
        status = subprocess.run([str(STRATA), "cluster", "status", "-b", f"127.0.0.1:{port}"],
                                capture_output=True, text=True, timeout=60, check=True)
        assert "2 brokers" in status.stdout
        etcd = subprocess.run(["pgrep", "-f", f"etcd --name=strata-dev --data-dir={data_dir}"],
                              capture_output=True, text=True, check=False).stdout.split()
        assert len(etcd) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
        assert broker_pids(data_dir) == []
        with pytest.raises(ProcessLookupError):
            os.kill(int(etcd[0]), 0)
    finally:
        cleanup(proc, data_dir, port)
        leftover = subprocess.run(["pgrep", "-f", f"etcd --name=strata-dev --data-dir={data_dir}"],
                                  capture_output=True, text=True, check=False).stdout.split()
        for pid in leftover:
            os.kill(int(pid), signal.SIGKILL)


@pytest.mark.parametrize(("args", "message"), [
    (["--brokers", "0"], "--brokers must be at least 1"),
    (["--metadata", "zookeeper"], "--metadata zookeeper: expected sqlite or etcd"),
])
def test_dev_refuses_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    out = subprocess.run([str(STRATA), "dev", *args, "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert message in out.stderr


def test_broker_properties_use_kafka_names(tmp_path: Path) -> None:
    props = broker_properties(2, 9094, 7000, tmp_path, brokers=3,
                              metadata_store="sqlite:////tmp/meta.db")
    assert props["node.id"] == "2"
    assert props["metadata.store"] == "sqlite:////tmp/meta.db"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9094"
    assert props["default.replication.factor"] == "3"
    assert props["log.dirs"] == str(tmp_path)
