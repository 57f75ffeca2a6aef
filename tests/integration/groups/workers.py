"""Consumer-group members as child processes of the test, feeding one ``Ledger``.

``Group`` starts members (``group_worker.py`` under this interpreter for confluent-kafka,
kafka-python and aiokafka; ``group_worker.js`` under node for kafkajs), reads each member's
stdout on a thread of its own into the shared ledger, keeps its stderr (the client's log) in a
file for failure reports, and on exit kills whatever is still running, so no test leaves a
consumer behind. ``stop`` is a graceful close (the member leaves the group); ``kill`` is
``kill -9``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from .kafka_ops import committed
from .ledger import Ledger, all_committed, expected_positions

HERE: Final = Path(__file__).resolve().parent
PY_WORKER: Final = HERE / "group_worker.py"
JS_DIR: Final = HERE.parent / "js"
JS_WORKER: Final = JS_DIR / "group_worker.js"
CLIENTS: Final = ("confluent", "kafka-python", "aiokafka", "kafkajs")
STOP_TIMEOUT_S: Final = 30.0
# The longest a test waits for a group to settle or catch up: a session timeout (6 s) plus the
# clients' backoffs, with slack for a loaded CI machine.
WAIT_S: Final = 90.0
# What each batch's "processing" takes in tests that want rebalances to happen while records
# are in flight (the workers' ``work_ms``).
WORK_MS: Final = 30
STDERR_TAIL_CHARS: Final = 1500
# How often ``wait_processed`` asks the coordinator for the group's committed offsets.
COMMIT_POLL_S: Final = 0.25


class Member:
    """One worker process."""

    def __init__(self, ledger: Ledger, name: str, client: str, spec: dict[str, Any],
                 logdir: Path) -> None:
        self.name = name
        self.client = client
        self.stderr_path = logdir / f"{name}.stderr"
        payload = json.dumps({**spec, "client": client, "name": name})
        if client == "kafkajs":
            node = shutil.which("node")
            assert node is not None, "node is not on PATH: kafkajs tests need Node.js"
            assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), (
                f"kafkajs is not installed: run `make node-deps` (npm ci in {JS_DIR})"
            )
            command, cwd = [node, str(JS_WORKER), payload], JS_DIR
        else:
            command, cwd = [sys.executable, str(PY_WORKER), payload], HERE
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=cwd,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
                start_new_session=True,
            )
        self._reader = threading.Thread(target=self._read, args=(ledger,), daemon=True)
        self._reader.start()

    def _read(self, ledger: Ledger) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                data = {"e": "noise", "line": line}
            ledger.add(self.name, data)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Close gracefully (LeaveGroup) and assert a clean exit."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.write(b"stop\n")
            self.process.stdin.flush()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close within {timeout:.0f}s\n"
                                 f"{self.stderr_tail()}") from None
        self._reap()
        assert code == 0, f"{self.name} exited {code} on stop\n{self.stderr_tail()}"

    def kill(self) -> None:
        """``kill -9``: no LeaveGroup, no final commit."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._reap()

    def _reap(self) -> None:
        """Close our ends of the pipes once the process is gone and its output read."""
        self._reader.join(5)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return f"--- {self.name} stderr (tail) ---\n{text[-STDERR_TAIL_CHARS:]}"


class Group:
    """The members of one consumer group in one test, and the ledger they report to."""

    def __init__(self, bootstrap: str, group: str, logdir: Path) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.logdir = logdir
        self.ledger = Ledger()
        self.ledger.describe_workers = self._stderr_tails
        self.members: dict[str, Member] = {}

    def start(self, name: str, client: str, **spec: Any) -> Member:
        member = Member(self.ledger, name, client,
                        {"bootstrap": self.bootstrap, "group": self.group, **spec}, self.logdir)
        self.members[name] = member
        return member

    def start_sharing(self, names: list[str], client: str, partitions: set[tuple[str, int]],
                      **spec: Any) -> None:
        """Start members ``names`` and wait for a generation in which they share
        ``partitions``, each with some."""
        for name in names:
            self.start(name, client, **spec)
        self.ledger.wait_until(lambda lg: lg.covers(names, partitions), WAIT_S,
                               f"{len(names)} members to share {len(partitions)} partitions")

    def wait_processed(self, ends: Mapping[tuple[str, int], int], what: str) -> None:
        """Wait until every record below ``ends`` was processed and each end committed.

        A commit counts once the coordinator has it: a member may report a commit as failed
        that landed all the same (kafkajs cannot tell while it disconnects), and the partition's
        next owner then has nothing left to commit."""
        expected = expected_positions(ends)
        self.ledger.wait_until(lambda lg: lg.unique >= expected, WAIT_S, what)
        deadline = time.monotonic() + WAIT_S
        while True:
            if all_committed(ends)(self.ledger):
                return
            have = committed(self.bootstrap, self.group, ends)
            if all(have[tp] >= end for tp, end in ends.items()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {WAIT_S:.0f}s waiting for {what}: "
                                     f"committed {have} vs ends {dict(ends)}\n"
                                     f"{self.ledger.summary()}")
            time.sleep(COMMIT_POLL_S)

    def _stderr_tails(self) -> str:
        return "\n".join(m.stderr_tail() for m in self.members.values()
                         if m.process.poll() is not None or m.stderr_path.stat().st_size)

    def __enter__(self) -> Group:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for member in self.members.values():
            member.kill()
