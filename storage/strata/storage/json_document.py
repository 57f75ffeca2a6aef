"""One JSON document in a log dir, the single broker's stand-in for the metadata store.

Owns the file discipline that ``acls.json``, ``credentials.json`` and ``client-quotas.json``
share, so a single broker (no ``metadata.store``) and ``strata`` commands given ``--log-dir``
can change the same state without losing each other's writes:

- the document is ``{"v": FORMAT_VERSION, ...}``; a reader refuses a newer ``v``
  (``ValueError``) instead of misreading a later Strata's file; an absent file reads as ``{}``;
- a write replaces the file atomically and durably (``strata.storage.checkpoints.atomic_write``),
  so a reader never sees half a file, with ``mode`` 0o600 for secrets;
- ``locked()`` holds an exclusive ``flock`` on ``<name>.lock`` around a read-modify-write, across
  processes; within one process callers serialise their own coroutines;
- ``stamp()`` (inode, size, mtime) changes whenever anyone rewrites the file: pollers compare
  it to notice another process's change.

Blocking file I/O: callers run these methods off the event loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from strata.storage.checkpoints import atomic_write

FORMAT_VERSION: Final = 1


class JsonDocumentFile:
    """``name`` in ``log_dir``: read, locked, written whole."""

    def __init__(self, log_dir: Path, name: str, *, mode: int = 0o644) -> None:
        self.path = Path(log_dir) / name
        self.mode = mode

    def stamp(self) -> tuple[int, int, int] | None:
        """(inode, size, mtime ns) of the file, None if absent."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def read(self) -> dict[str, Any]:
        """The document (without its ``v``), ``{}`` when the file does not exist."""
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        if not isinstance(doc, dict):
            raise ValueError(f"{self.path} does not hold a JSON object")
        version = doc.pop("v", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(f"{self.path} has format version {version}, newer than Strata's")
        return doc

    def write(self, doc: dict[str, Any]) -> None:
        """Replace the document (``v`` is added)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"v": FORMAT_VERSION, **doc}, sort_keys=True, indent=1).encode()
        atomic_write(self.path, data, mode=self.mode)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive ``flock`` on ``<name>.lock`` for one read-modify-write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
