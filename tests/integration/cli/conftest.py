"""Running the installed ``strata`` command as a subprocess, the way scripts run it.

``strata_cli`` (needs the module's ``broker``) runs ``strata ARGS...`` with
``STRATA_BOOTSTRAP_SERVERS`` pointing at that broker, so the default of ``--bootstrap-server``
is exercised too; ``run_strata`` runs it against any environment. Every run has a deadline: a
hung command fails its test instead of stalling the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..broker_process import BrokerProcess

STRATA = Path(sys.executable).with_name("strata")
RUN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.splitlines()

    def ok(self) -> Result:
        """Assert exit 0 (showing stderr otherwise) and return self, for chaining."""
        assert self.returncode == 0, f"strata {' '.join(self.args)} -> {self.returncode}\n{self}"
        return self

    def __str__(self) -> str:
        return f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


def run_strata(
    *args: str,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> Result:
    started = time.monotonic()
    completed = subprocess.run(
        [str(STRATA), *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("STRATA_")},
             **(env or {})},
        timeout=timeout,
        check=False,
    )
    return Result(tuple(args), completed.returncode, completed.stdout, completed.stderr,
                  time.monotonic() - started)


StrataCli = Callable[..., Result]


@pytest.fixture
def strata_cli(broker: BrokerProcess) -> StrataCli:
    env = {"STRATA_BOOTSTRAP_SERVERS": broker.bootstrap}

    def run(*args: str, input: str | None = None, timeout: float = RUN_TIMEOUT_S) -> Result:
        return run_strata(*args, env=env, input=input, timeout=timeout)

    return run
