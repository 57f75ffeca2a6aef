"""The single broker's JSON documents: versioned, replaced whole, flock-guarded, stamped."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from strata.storage.json_document import FORMAT_VERSION, JsonDocumentFile


def test_an_absent_file_reads_empty_and_a_write_reads_back(tmp_path: Path) -> None:
    doc = JsonDocumentFile(tmp_path / "dir", "state.json", mode=0o600)
    assert doc.read() == {} and doc.stamp() is None
    doc.write({"items": [1, 2]})
    assert doc.read() == {"items": [1, 2]}
    assert json.loads(doc.path.read_text())["v"] == FORMAT_VERSION
    assert os.stat(doc.path).st_mode & 0o777 == 0o600
    first = doc.stamp()
    doc.write({"items": [3]})
    assert doc.stamp() != first


def test_a_newer_format_or_a_non_object_is_refused(tmp_path: Path) -> None:
    doc = JsonDocumentFile(tmp_path, "state.json")
    doc.path.write_text(json.dumps({"v": FORMAT_VERSION + 1}))
    with pytest.raises(ValueError, match="newer than Strata's"):
        doc.read()
    doc.path.write_text("[1]")
    with pytest.raises(ValueError, match="JSON object"):
        doc.read()


def test_the_lock_is_exclusive_across_open_files(tmp_path: Path) -> None:
    doc = JsonDocumentFile(tmp_path, "state.json")
    with (doc.locked(), open(tmp_path / "state.json.lock", "a+b") as other,
          pytest.raises(BlockingIOError)):
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
