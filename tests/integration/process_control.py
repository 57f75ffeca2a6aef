"""Stopping a server process a test started: by its PID only, with a deadline; and its log.

``signal_and_wait`` sends one signal to the process (never its process group: a test stops
exactly what it started), waits up to ``timeout``, and falls back to SIGKILL. It returns the
exit code (negative: the signal that ended it), so a caller can tell a clean shutdown (0) from
one that needed SIGKILL (-9).

``log_tail`` is the end of a server's log file for a failure report (a stand-in line when
there is no log yet).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

KILL_TIMEOUT_S = 10.0


def signal_and_wait(process: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM,
                    timeout: float = 20.0) -> int:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait(KILL_TIMEOUT_S)
    return process.returncode


def log_tail(path: Path, lines: int, missing: str) -> str:
    """The last ``lines`` lines of the log at ``path``, or ``missing`` when it cannot be read."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return missing
