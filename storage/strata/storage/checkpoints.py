"""Kafka's text checkpoint files (``CheckpointFile``) and the atomic small-file write under them.

Owns the format and the write protocol of every small text checkpoint a broker keeps:

* per log dir, ``OffsetCheckpointFile`` — ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``: ``(topic, partition) -> offset``;
* per partition dir, ``LeaderEpochCheckpointFile`` — ``leader-epoch-checkpoint``:
  ``epoch -> start offset`` (read and written by ``leader_epoch_cache.LeaderEpochFileCache``).

File format (Kafka's, byte-compatible: UTF-8 text, ``\\n`` line ends)::

    0                  line 1: format version (0 for all of these files)
    2                  line 2: number of entries that follow
    my-topic 0 1234    one entry per line, fields separated by whitespace
    my-topic 1 99      (leader-epoch-checkpoint lines are "epoch startOffset")

Invariants: the entry count on line 2 equals the number of entry lines; every entry line parses.
Topic names never contain whitespace (Kafka's legal characters are ``[a-zA-Z0-9._-]``).

Write protocol (``atomic_write``, Kafka's ``atomicMoveWithFallback``): write ``<file>.tmp``,
fsync it, rename it over ``<file>``, fsync the directory. A reader therefore sees the old file or
the new one, never a torn one. ``durable=False`` (a ``leader-epoch-checkpoint`` change on the
append path, Kafka's KAFKA-15046) skips both fsyncs: the rename still replaces the file whole for
every reader and survives a killed process (the page cache does); the owner makes it durable
later with ``CheckpointFile.sync`` (fsync of the file and its directory), before anything that
relies on it after an OS crash — for the epoch cache, before the log's recovery point moves.

Crash policy: a crash mid-write leaves the old file (and maybe a stale ``<file>.tmp``, truncated
and reused by the next write). A missing file reads as no entries. A malformed file (bad
version, count or line; not UTF-8) raises ``CorruptCheckpointError`` naming the file and line;
callers treat it as absent, which for offsets means "recover everything" — always safe.
Other I/O errors (EIO, ENOSPC) raise ``KafkaStorageError`` so the log dir can go offline.

Who mutates: each file has one owner — ``LogManager`` (offset checkpoints of its log dirs),
the log cleaner (``cleaner-offset-checkpoint``), one ``LeaderEpochFileCache`` per partition. A
``CheckpointFile`` serialises its own reads and writes with a lock; two instances over the same
path must not write concurrently (they share ``<file>.tmp``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from strata.storage.errors import KafkaStorageError, StorageError

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

LEADER_EPOCH_CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"
TMP_FILE_SUFFIX = ".tmp"

_INT = re.compile(r"-?[0-9]+")
_WHITESPACE = re.compile(r"\s+")

T = TypeVar("T")


class CorruptCheckpointError(StorageError):
    """A checkpoint file that cannot be parsed, at ``path``, ``line_number`` (1-based) if known."""

    def __init__(self, path: Path, line_number: int | None, reason: str) -> None:
        where = f"{path}" if line_number is None else f"{path}, line {line_number}"
        super().__init__(f"malformed checkpoint file {where}: {reason}")
        self.path = path
        self.line_number = line_number


def fsync_dir(dir: Path) -> None:
    """fsync a directory so a rename or unlink inside it survives an OS crash."""
    fd = os.open(dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably (tmp, fsync, rename, fsync dir);
    the new file gets ``mode`` (0o600 for secrets). ``durable=False`` leaves out both fsyncs
    (module docstring: the caller syncs later).

    Raises ``KafkaStorageError`` on any OS error; ``path`` is then unchanged.
    """
    tmp = path.with_name(path.name + TMP_FILE_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise KafkaStorageError(f"cannot write {path}: {exc}") from exc


def parse_int(text: str) -> int | None:
    """Java's ``Integer.parseInt`` strictness: optional '-', ASCII digits, nothing else."""
    return int(text) if _INT.fullmatch(text) else None


class EntryFormatter(Protocol[T]):
    """How one entry becomes one line and back (Kafka's ``CheckpointFile.EntryFormatter``)."""

    def to_string(self, entry: T) -> str: ...

    def from_string(self, line: str) -> T | None:
        """The entry, or None when the line is malformed."""
        ...


class CheckpointFile(Generic[T]):
    """Kafka's ``CheckpointFile``: version line, count line, one formatted entry per line."""

    def __init__(self, path: Path, version: int, formatter: EntryFormatter[T]) -> None:
        self.path = Path(path)
        self.version = version
        self.formatter = formatter
        self._lock = threading.Lock()
        self._unsynced = False  # a write with durable=False not yet made durable by ``sync``

    def write(self, entries: Iterable[T], *, durable: bool = True) -> None:
        """Replace the file with ``entries`` (``atomic_write``; ``durable=False``: no fsync,
        ``sync`` later)."""
        lines = [self.formatter.to_string(e) for e in entries]
        text = "".join(f"{line}\n" for line in (str(self.version), str(len(lines)), *lines))
        with self._lock:
            atomic_write(self.path, text.encode("utf-8"), durable=durable)
            self._unsynced = not durable

    def sync(self) -> None:
        """Make the last ``write(durable=False)`` durable: fsync the file and its directory
        (nothing when every write since the last sync was durable). Under the write lock, so
        the file synced is the one in place. Raises ``KafkaStorageError``."""
        with self._lock:
            if not self._unsynced:
                return
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                fsync_dir(self.path.parent)
            except OSError as exc:
                raise KafkaStorageError(f"cannot sync {self.path}: {exc}") from exc
            self._unsynced = False

    def read(self) -> list[T]:
        """The entries; ``[]`` if the file is missing. Raises ``CorruptCheckpointError``."""
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise KafkaStorageError(f"cannot read {self.path}: {exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptCheckpointError(self.path, None, f"not UTF-8 text ({exc})") from exc
        lines = [line.removesuffix("\r") for line in text.split("\n")]
        if lines and lines[-1] == "":
            lines.pop()  # the final line end
        if not lines:
            return []  # an empty file, as Kafka's reader allows
        version = parse_int(lines[0].strip())
        if version is None:
            raise CorruptCheckpointError(self.path, 1, f"version {lines[0]!r} is not a number")
        if version != self.version:
            raise CorruptCheckpointError(
                self.path, 1, f"unrecognised version {version}, expected {self.version}"
            )
        if len(lines) < 2:
            return []
        expected = parse_int(lines[1].strip())
        if expected is None or expected < 0:
            raise CorruptCheckpointError(self.path, 2, f"entry count {lines[1]!r} is invalid")
        entries: list[T] = []
        for number, line in enumerate(lines[2:], start=3):
            entry = self.formatter.from_string(line)
            if entry is None:
                raise CorruptCheckpointError(self.path, number, f"malformed entry {line!r}")
            entries.append(entry)
        if len(entries) != expected:
            raise CorruptCheckpointError(
                self.path, 2, f"expected {expected} entries but found {len(entries)}"
            )
        return entries


# ------------------------------------------------------------------ offset checkpoints
class _OffsetFormatter:
    def to_string(self, entry: tuple[TopicPartition, int]) -> str:
        (topic, partition), offset = entry
        return f"{topic} {partition} {offset}"

    def from_string(self, line: str) -> tuple[TopicPartition, int] | None:
        fields = _WHITESPACE.split(line.strip())
        if len(fields) != 3:
            return None
        partition, offset = parse_int(fields[1]), parse_int(fields[2])
        if partition is None or offset is None:
            return None
        return (fields[0], partition), offset


class OffsetCheckpointFile:
    """``recovery-point-offset-checkpoint`` & co.: ``(topic, partition) -> offset`` (version 0)."""

    CURRENT_VERSION = 0

    def __init__(self, path: Path) -> None:
        self._checkpoint = CheckpointFile(Path(path), self.CURRENT_VERSION, _OffsetFormatter())

    @property
    def path(self) -> Path:
        return self._checkpoint.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Atomically replace the file with ``offsets`` (written sorted by topic, partition)."""
        for topic, _ in offsets:
            if not topic or _WHITESPACE.search(topic):
                raise ValueError(f"topic name {topic!r} cannot be written to {self.path}")
        self._checkpoint.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        """The offsets; ``{}`` if the file is missing. Raises ``CorruptCheckpointError``."""
        return dict(self._checkpoint.read())

    def read_or_empty(self) -> dict[TopicPartition, int]:
        """``read()``, but a malformed file logs a warning and reads as empty (full recovery)."""
        try:
            return self.read()
        except CorruptCheckpointError as exc:
            logger.warning("ignoring %s; treating it as absent", exc)
            return {}


# --------------------------------------------------------------- leader-epoch checkpoint
@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader ``epoch`` started at ``start_offset`` (the first offset a leader of it appended)."""

    epoch: int
    start_offset: int


class _EpochEntryFormatter:
    def to_string(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_string(self, line: str) -> EpochEntry | None:
        fields = _WHITESPACE.split(line.strip())
        if len(fields) != 2:
            return None
        epoch, start_offset = parse_int(fields[0]), parse_int(fields[1])
        if epoch is None or start_offset is None or epoch < 0 or start_offset < 0:
            return None
        return EpochEntry(epoch, start_offset)


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint`` of one partition dir: lines "epoch startOffset" (version 0)."""

    FILE_NAME = LEADER_EPOCH_CHECKPOINT_FILE_NAME
    CURRENT_VERSION = 0

    def __init__(self, path: Path) -> None:
        self._checkpoint = CheckpointFile(Path(path), self.CURRENT_VERSION, _EpochEntryFormatter())

    @classmethod
    def new_file(cls, dir: Path) -> Path:
        return Path(dir) / cls.FILE_NAME

    @property
    def path(self) -> Path:
        return self._checkpoint.path

    def write(self, entries: Iterable[EpochEntry], *, durable: bool = True) -> None:
        self._checkpoint.write(entries, durable=durable)

    def sync(self) -> None:
        """fsync the last ``write(durable=False)`` (``CheckpointFile.sync``)."""
        self._checkpoint.sync()

    def read(self) -> list[EpochEntry]:
        """The entries in file order; ``[]`` if missing. Raises ``CorruptCheckpointError``."""
        return self._checkpoint.read()
