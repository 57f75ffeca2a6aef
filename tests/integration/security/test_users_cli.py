"""``strata users create|list|delete`` against a SQLite metadata store and a broker's log dir:
exit codes, listing formats, and that only salted credentials are written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ..broker_process import STRATA

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STRATA), "users", *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("where", ["metadata-store", "log-dir"])
def test_create_list_delete(tmp_path: Path, where: str) -> None:
    target = (["--metadata-store", f"sqlite:///{tmp_path / 'meta.db'}"]
              if where == "metadata-store" else ["--log-dir", str(tmp_path / "data")])
    created = _strata("create", "alice", "--password", "pa55word", *target)
    assert created.returncode == 0, created.stderr
    assert _strata("create", "bob", "--password", "x", "-m", "SCRAM-SHA-256",
                   *target).returncode == 0
    listed = _strata("list", "--format", "json", *target)
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
        {"user": "bob", "mechanisms": ["SCRAM-SHA-256"]}]
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"pa55word" not in stored
    assert _strata("delete", "alice", *target).returncode == 0
    missing = _strata("delete", "alice", *target)
    assert missing.returncode == 1 and "no user alice" in missing.stderr
    assert "alice" not in _strata("list", *target).stdout


def test_usage_errors(tmp_path: Path) -> None:
    both = _strata("create", "a", "--password", "p", "--log-dir", str(tmp_path),
                   "--metadata-store", f"sqlite:///{tmp_path / 'm.db'}")
    assert both.returncode == 2 and "exactly one" in both.stderr
    bad = _strata("create", "a", "--password", "p", "-m", "MD5", "--log-dir", str(tmp_path))
    assert bad.returncode == 2
    few = _strata("create", "a", "--password", "p", "--iterations", "100",
                  "--log-dir", str(tmp_path))
    assert few.returncode == 2 and "iterations" in few.stderr
