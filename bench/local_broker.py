"""A throwaway Strata broker for the client benchmarks (``bench/produce.py``, ``consume.py``).

``local_broker()`` starts ``python -m strata.broker --config FILE`` as a subprocess with its own
temp log dir, the Kafka listener and HTTP port on free ports (port 0: the broker binds a free
port and prints the address it serves on), waits for the ready line, yields the bootstrap
address, and stops the broker with SIGTERM (it flushes and exits 0) when the block ends.
``local_cluster(n)`` does the same for ``n`` brokers forming one cluster on a SQLite metadata
store; given a ``root`` it keeps its data there, so a second ``local_cluster`` on the same root
restarts the same brokers (``bench/scale.py``'s recovery after kill -9).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

READY = re.compile(r"serving Kafka on (\S+):(\d+)")
START_TIMEOUT_S = 60.0


@contextlib.contextmanager
def local_broker(extra_config: dict[str, str] | None = None,
                 data_dir: Path | None = None, pids: list[int] | None = None,
                 cprofile: Path | None = None) -> Iterator[str]:
    """Start a broker; yield ``host:port``; stop it cleanly. Its PID is appended to ``pids``
    (e.g. for a profiler) while it runs. With ``cprofile``, the broker runs under
    ``bench/cprofile_broker.py`` (profiling while SIGUSR1..SIGUSR2; stats written there)."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="strata-")))
        config = {
            "node.id": "1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.port": "0",
            "log.dirs": str(data_dir / "data"),
            "num.partitions": "1",
            **(extra_config or {}),
        }
        path = data_dir / "broker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()), encoding="utf-8")
        log_path = data_dir / "broker.log"
        log_file = stack.enter_context(open(log_path, "wb"))
        command = [sys.executable, "-m", "strata.broker", "--config", str(path)]
        if cprofile is not None:
            command = [sys.executable, str(Path(__file__).with_name("cprofile_broker.py")),
                       "--out", str(cprofile), "--", "--config", str(path)]
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE, stderr=log_file, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if pids is not None:
            pids.append(proc.pid)
        try:
            address = _wait_ready(proc, log_path)
            yield address
        finally:
            _stop(proc)
            if pids is not None:
                pids.remove(proc.pid)


def _wait_ready(proc: subprocess.Popen[bytes], log_path: Path) -> str:
    assert proc.stdout is not None
    found: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            match = READY.search(line)
            if match and not found:
                host = "127.0.0.1" if match.group(1) in ("0.0.0.0", "") else match.group(1)
                found.append(f"{host}:{match.group(2)}")
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not done.wait(0.1):
        if time.monotonic() > deadline or proc.poll() is not None:
            break
    if not found:
        _stop(proc)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the broker did not become ready (exit code {proc.poll()}):\n{tail}")
    return found[0]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def local_cluster(brokers: int, extra_config: dict[str, str] | None = None,
                  pids: list[int] | None = None, cprofile_dir: Path | None = None,
                  root: Path | None = None, parallel: bool = False) -> Iterator[str]:
    """Start ``brokers`` brokers on one SQLite metadata store (what ``strata dev`` runs); yield
    the bootstrap list once every broker is registered; stop them all. Their PIDs are in
    ``pids`` while they run; with ``cprofile_dir`` each runs under ``cprofile_broker.py``,
    writing ``broker-N.prof`` there. With ``root`` the data stays there (reused if present);
    ``parallel`` starts the brokers at once rather than one after the other."""
    from confluent_kafka.admin import AdminClient

    with contextlib.ExitStack() as stack:
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="strata-cluster-")))
        starts = []
        for node in range(brokers):
            node_dir = root / f"broker-{node}"
            node_dir.mkdir(exist_ok=True)
            starts.append(local_broker({
                "node.id": str(node), "metadata.store": f"sqlite:///{root / 'meta.db'}",
                "default.replication.factor": str(min(3, brokers)),
                "offsets.topic.replication.factor": str(min(3, brokers)),
                **(extra_config or {})}, node_dir, pids,
                None if cprofile_dir is None else cprofile_dir / f"broker-{node}.prof"))
        if parallel:  # each started broker's stop is on the stack even if another fails
            with ThreadPoolExecutor(brokers) as pool:
                futures = [pool.submit(stack.enter_context, start) for start in starts]
            addresses = [future.result() for future in futures]
        else:
            addresses = [stack.enter_context(start) for start in starts]
        bootstrap = ",".join(addresses)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(admin.list_topics(timeout=5).brokers) < brokers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{brokers} brokers did not register within "
                                   f"{START_TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        yield bootstrap
