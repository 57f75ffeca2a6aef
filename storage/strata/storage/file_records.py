"""The ``.log`` file of a segment: batches appended with ``os.write``, read with ``os.pread``.

Kafka's ``FileRecords``. Byte format: a plain concatenation of RecordBatch v2 batches exactly as
clients sent them (offsets and leader epoch assigned), no file header; see ``record_batch`` for
the batch layout. ``size_in_bytes`` is the logical end: the first byte after the last whole
appended batch. A preallocated file (``preallocate_size``) is longer than that, zero-filled,
until ``trim`` (on roll and close).

Invariants:

* Only whole batches are ever counted in ``size_in_bytes``. ``append`` returns after every byte
  reached the OS (``write`` returned), which is when a produce may be acknowledged: a killed
  process loses nothing acknowledged. A failed write (ENOSPC, EIO...) is cut off again
  (best effort) and raises ``KafkaStorageError``; the size is unchanged either way.
* The file descriptor's position is kept at ``size_in_bytes``; reads never move it (``pread``).

Crash policy: the ``.log`` is the source of truth. After an unclean shutdown its tail may hold a
partial or zeroed batch (unflushed pages, preallocation); ``LogSegment.recover`` scans it with
``batches(verify_crc=True)`` and truncates at the first invalid batch. ``flush`` is ``fsync``.

Descriptors: an *active* file (the active segment's ``.log``, a segment being written) owns
its descriptor. An *inactive* file - opened with ``lazy=True`` (an inactive segment at load) or
made so by ``make_inactive`` (a roll) - borrows one from ``descriptor_pool.DESCRIPTOR_POOL``
when a read, flush or truncation needs it; the pool may close it again (least recently used
first) and the next use reopens it by its *current* path. The first ``append`` makes a file
active again (a truncation left an older segment last). Every use holds the ``Descriptor``
object for its duration, and a ``FileSlice`` holds it until the slice is dropped: eviction,
``close`` and ``delete`` never close a descriptor a slice may still ``sendfile`` from (it closes
with the last slice), so its fd number is never reused under it. The pool's bound counts
those held descriptors too: at the bound, an inactive file is read through a transient
descriptor and ``slice`` returns the bytes themselves (``FileSlice.data``), not a descriptor.
``delete`` leaves the pool at once; a file's size comes from ``stat`` until it is opened.

Threads: appends, reads, truncation and renames run on the log's owner thread; ``flush`` may run
on a worker thread, the cleaner reads on its own; opening a file and ``rename_to`` run under
the pool's lock, so a reopen on another thread sees the old path or the new one, never a gap.
A ``FileSlice`` stays readable after a rename (even to ``.deleted``), a ``close`` or a
``delete``, until it is dropped.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from strata.storage.descriptor_pool import DESCRIPTOR_POOL, Descriptor, DescriptorPool
from strata.storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    UnsupportedForMessageFormatError,
)
from strata.storage.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    compute_crc,
    parse_header,
)
from strata.storage.records import iter_records

logger = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024  # bytes read at once while scanning batch headers
NO_FD = -1  # ``FileSlice.fd`` of a slice that holds its bytes


def pread_fully(fd: int, position: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``position``: loops over short reads, stops early only at EOF."""
    if size <= 0:
        return b""
    first = os.pread(fd, size, position)
    if len(first) == size or not first:
        return first
    parts, got = [first], len(first)
    while got < size:
        chunk = os.pread(fd, size - got, position + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes of an open file at ``position``: what a read returns, ready for
    ``os.sendfile(out, fd, position, length)``. A slice may end inside a batch (like Kafka).

    ``descriptor`` (set by ``FileRecords.slice``) keeps ``fd`` open for as long as the slice
    lives, whatever happens to its file meanwhile (module docstring): keep the slice, not the
    bare ``fd``, until the bytes are sent. A slice built from a bare ``fd`` (tests) relies on
    its caller to keep that fd open. A slice of an inactive file read while the descriptor
    pool was at its bound holds ``data`` (the bytes, read at once) and no descriptor; its
    ``fd`` is ``NO_FD``: send ``read_bytes()``."""

    fd: int
    position: int
    length: int
    descriptor: Descriptor | None = field(default=None, compare=False, repr=False)
    data: bytes | None = field(default=None, repr=False)

    def read_bytes(self) -> bytes:
        """The slice's bytes (fewer only if the file was truncated under it)."""
        if self.data is not None:
            return self.data
        return pread_fully(self.fd, self.position, self.length)


class FileRecords:
    """A ``.log`` file. Build it with ``FileRecords.open``."""

    def __init__(self, path: Path, descriptor: Descriptor | None, size: int, *,
                 pool: DescriptorPool = DESCRIPTOR_POOL) -> None:
        """``descriptor``: the open file, owned (an active file); None: an inactive file that
        borrows from ``pool``."""
        self.path = path
        self._own = descriptor
        self._pool = pool
        self._size = size
        self._dirty = False
        self._closed = False
        if descriptor is not None:
            os.lseek(descriptor.fd, size, os.SEEK_SET)

    @classmethod
    def open(cls, path: Path, create: bool = True, *, preallocate_size: int = 0,
             lazy: bool = False) -> FileRecords:
        """Open ``path`` (creating it if ``create``; an existing file keeps its bytes).

        A *new* file is preallocated (sparse) to ``preallocate_size`` bytes when that is > 0;
        its logical size starts at 0. An existing file's logical size is its length. With
        ``lazy`` an existing file is only ``stat``ed and is inactive: it borrows a descriptor
        from the pool when first used.
        """
        if lazy and not create:
            return cls(path, None, os.stat(path).st_size)
        existed = path.exists()
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        descriptor = Descriptor(os.open(path, flags, 0o644))
        if not existed and preallocate_size > 0:
            os.ftruncate(descriptor.fd, preallocate_size)
            size = 0
        else:
            size = os.fstat(descriptor.fd).st_size
        return cls(path, descriptor, size)

    # --------------------------------------------------------- descriptors
    def descriptor(self) -> Descriptor:
        """The open file: the owned descriptor, or one borrowed from the pool (opened by the
        current path if the pool holds none). Hold the result while its ``fd`` is used.
        ``KafkaStorageError`` (caused by the ``OSError``) if it cannot be opened, e.g. EMFILE;
        ``ValueError`` after ``close``/``delete``."""
        own = self._own
        if own is not None:
            return own
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        return self._pool.checkout(self, self._open_fd)[0]

    def _open_fd(self) -> int:
        """Open the file by its current path (under the pool's lock, like ``rename_to``)."""
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:  # EMFILE: this read or append fails, not the broker
            raise KafkaStorageError(f"cannot open {self.path}: {exc}") from exc
        os.lseek(fd, self._size, os.SEEK_SET)
        return fd

    @property
    def fd(self) -> int:
        """The descriptor number of an active file (which owns it). An inactive file has no
        stable one: hold ``descriptor()`` (or a ``slice``) while using its fd."""
        own = self._own
        if own is None:
            raise ValueError(f"{self.path} is inactive or closed: use descriptor()")
        return own.fd

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open for the file now (owned, or held by the pool)."""
        return not self._closed and (self._own is not None or self._pool.holds(self))

    @property
    def is_active(self) -> bool:
        """Whether the file owns its descriptor (not borrowing from the pool)."""
        return self._own is not None

    def make_inactive(self) -> None:
        """The segment rolled: hand the descriptor to the pool (it may close it from now on)."""
        own = self._own
        if own is None or self._closed:
            return
        self._own = None
        self._pool.adopt(self, own)

    def _make_active(self) -> Descriptor:
        """The file is written to again: own its descriptor, out of the pool."""
        own = self._own
        if own is None:
            if self._closed:
                raise ValueError(f"{self.path} is closed")
            own = self._pool.claim(self, self._open_fd)
            self._own = own
        return own

    @property
    def size_in_bytes(self) -> int:
        return self._size

    # -------------------------------------------------------------- writes
    def append(self, data: Buffer | Sequence[Buffer]) -> int:
        """Write ``data`` (whole batches; one buffer or several written back to back with
        ``os.writev``) at the end; returns the bytes written.

        Several buffers let the Log write a rewritten 16-byte batch prefix beside a view of the
        client's bytes, so a batch is never copied. Returns only once every byte was handed to
        the OS. On a disk error the file is cut back to its previous size (best effort),
        ``size_in_bytes`` is unchanged and ``KafkaStorageError`` names the file and the errno.
        An inactive file becomes active (it owns its descriptor from now on).
        """
        if isinstance(data, (bytes, bytearray, memoryview)):
            views = [_byte_view(data)]
        else:
            views = [_byte_view(d) for d in data]
        total = sum(v.nbytes for v in views)
        if total == 0:
            return 0
        start, written = self._size, 0
        fd = self._make_active().fd
        try:
            while views:
                n = os.writev(fd, views) if len(views) > 1 else os.write(fd, views[0])
                if n <= 0:
                    raise OSError(errno.EIO, "write made no progress")
                written += n
                views = _advance(views, n)
        except OSError as exc:
            self._roll_back_failed_append(fd, start, written)
            code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            raise KafkaStorageError(
                f"append of {total} bytes to {self.path} at position {start} failed after "
                f"{written} bytes: {code} ({exc.strerror})"
            ) from exc
        self._size = start + total
        self._dirty = True
        return total

    def _roll_back_failed_append(self, fd: int, start: int, written: int) -> None:
        try:
            if written:
                os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
        except OSError as exc:  # the log dir goes offline anyway; recovery cuts the tail
            logger.error("cannot cut %s back to %d bytes after a failed append: %s",
                         self.path, start, exc)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes (<= its size); returns the bytes removed."""
        if size < 0 or size > self._size:
            raise ValueError(f"attempt to truncate {self.path} to {size} bytes failed: "
                             f"its size is {self._size} bytes")
        removed = self._size - size
        try:
            descriptor = self.descriptor()
            if size < os.fstat(descriptor.fd).st_size:
                os.ftruncate(descriptor.fd, size)
            os.lseek(descriptor.fd, size, os.SEEK_SET)
        except OSError as exc:
            raise KafkaStorageError(f"truncation of {self.path} to {size} bytes failed: "
                                    f"{exc}") from exc
        self._size = size
        self._dirty = True
        return removed

    def trim(self) -> None:
        """Drop a preallocated tail: the file length becomes ``size_in_bytes``. Only an active
        file can have one (``make_inactive`` follows a trim; a file found at load has none),
        so an inactive file is never reopened for this."""
        descriptor = self._own if self._own is not None else self._pool.peek(self)
        if descriptor is None:
            return
        if os.fstat(descriptor.fd).st_size > self._size:
            os.ftruncate(descriptor.fd, self._size)

    def flush(self) -> None:
        """fsync the file if anything changed since the last flush (an inactive file evicted
        meanwhile is reopened: fsync covers the file, whichever descriptor). Raises
        ``OSError`` or ``KafkaStorageError`` (the reopen failed)."""
        if self._dirty and not self._closed:
            self._dirty = False
            try:
                descriptor = self.descriptor()  # held: a transient one closes when dropped
                os.fsync(descriptor.fd)
            except (OSError, KafkaStorageError):
                self._dirty = True
                raise

    # --------------------------------------------------------------- reads
    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position``, never past ``size_in_bytes``."""
        self._check_position(position)
        descriptor = self.descriptor()
        return pread_fully(descriptor.fd, position, min(size, self._size - position))

    def slice(self, position: int, size: int) -> FileSlice:
        """A ``FileSlice`` of up to ``size`` bytes at ``position`` (clamped to the end); it
        keeps the descriptor open while it lives. An inactive file whose pool is at its bound
        (slices hold every descriptor it may have open) gives a slice holding the bytes."""
        self._check_position(position)
        if size < 0:
            raise ValueError(f"invalid slice size {size} for {self.path}")
        length = min(size, self._size - position)
        own = self._own
        if own is not None:
            return FileSlice(own.fd, position, length, own)
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        descriptor, pooled = self._pool.checkout(self, self._open_fd)
        if pooled:
            return FileSlice(descriptor.fd, position, length, descriptor)
        data = pread_fully(descriptor.fd, position, length)
        return FileSlice(NO_FD, position, len(data), data=data)

    def batches(
        self, start_position: int = 0, verify_crc: bool = False
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of each batch from ``start_position`` to the end.

        ``start_position`` must be a batch boundary. Stops cleanly at the end of the file;
        raises ``CorruptRecordError`` (with the file and position) at a batch that is truncated,
        badly framed, of another magic, or - with ``verify_crc`` - fails its CRC. Headers are
        read in chunks; with ``verify_crc`` every whole batch is read once.
        """
        self._check_position(start_position)
        end = self._size
        pos = start_position
        buf, buf_start = b"", pos
        while pos < end:
            try:
                avail = end - pos
                if avail < LOG_OVERHEAD:
                    raise CorruptRecordError(f"{avail} trailing bytes do not hold a batch")
                buf, buf_start = self._fill(buf, buf_start, pos, min(HEADER_SIZE, avail), end)
                header = parse_header(buf, pos - buf_start)
                if header.size > avail:
                    raise CorruptRecordError(
                        f"record batch truncated: {avail} of {header.size} bytes present")
                if verify_crc:
                    buf, buf_start = self._fill(buf, buf_start, pos, header.size, end)
                    if compute_crc(buf, pos - buf_start, header.size) != header.crc:
                        raise CorruptRecordError(
                            f"record batch at base offset {header.base_offset} fails CRC")
            except (CorruptRecordError, UnsupportedForMessageFormatError) as exc:
                raise CorruptRecordError(f"{self.path} at position {pos}: {exc}") from exc
            yield pos, header
            pos += header.size

    def search_for_offset_from_position(
        self, target_offset: int, starting_position: int
    ) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch from ``starting_position`` whose last
        offset is >= ``target_offset``, or None if there is none."""
        if starting_position > self._size:
            return None
        for position, header in self.batches(starting_position):
            if header.last_offset >= target_offset:
                return position, header
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record from ``starting_position`` with
        timestamp >= ``target_timestamp`` and offset >= ``starting_offset``, or None.

        Only batches whose max timestamp qualifies are decompressed and iterated.
        """
        if starting_position > self._size:
            return None
        for position, header in self.batches(starting_position):
            if header.max_timestamp < target_timestamp or header.last_offset < starting_offset:
                continue
            batch = self.read(position, header.size)
            for record in iter_records(batch, verify_crc=False):
                if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                    return record.timestamp, record.offset
        return None

    def find_record_with_timestamp(
        self, timestamp: int, starting_position: int
    ) -> tuple[int, int, int] | None:
        """``(timestamp, offset, partition leader epoch)`` of the first record from
        ``starting_position`` whose timestamp is ``timestamp``, or None. Only the first batch
        whose maxTimestamp is ``timestamp`` is decompressed (Kafka's
        ``RecordBatch.offsetOfMaxTimestamp``: under LogAppendTime every record carries the
        batch's time, so that is its first offset)."""
        if starting_position > self._size:
            return None
        for position, header in self.batches(starting_position):
            if header.max_timestamp != timestamp:
                continue
            batch = self.read(position, header.size)
            for record in iter_records(batch, verify_crc=False):
                if record.timestamp == timestamp:
                    return timestamp, record.offset, header.partition_leader_epoch
            return None
        return None

    def largest_timestamp_after(self, starting_position: int) -> tuple[int, int]:
        """``(max timestamp, last offset of the first batch holding it)`` of the batches from
        ``starting_position``; ``(-1, -1)`` if there are none with a timestamp."""
        best = (NO_TIMESTAMP, -1)
        for _, header in self.batches(starting_position):
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
        return best

    def _fill(self, buf: bytes, buf_start: int, pos: int, need: int,
              end: int) -> tuple[bytes, int]:
        """``(buf, buf_start)`` covering ``[pos, pos + need)``, reading ahead up to a chunk."""
        if buf_start <= pos and pos + need <= buf_start + len(buf):
            return buf, buf_start
        descriptor = self.descriptor()
        data = pread_fully(descriptor.fd, pos, min(max(need, READ_CHUNK), end - pos))
        if len(data) < need:
            raise CorruptRecordError(f"file ends after {len(data)} of {need} bytes")
        return data, pos

    def _check_position(self, position: int) -> None:
        if position < 0 or position > self._size:
            raise ValueError(f"position {position} is outside {self.path} "
                             f"({self._size} bytes)")

    # ----------------------------------------------------------- lifecycle
    @property
    def last_modified(self) -> int:
        """The file's modification time in ms."""
        descriptor = self._own if self._own is not None else self._pool.peek(self)
        if descriptor is None:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        return os.fstat(descriptor.fd).st_mtime_ns // 1_000_000

    def close(self) -> None:
        """fsync (if dirty), trim and close. Idempotent. Outstanding slices keep the
        descriptor open until they are dropped."""
        if self._closed:
            return
        try:
            self.flush()
            self.trim()
        finally:
            self._release_fd()

    def release(self) -> None:
        """Close without fsync or trim (the file is left as it is). Idempotent."""
        self._release_fd()

    def _release_fd(self) -> None:
        """Drop this file's descriptor (owned, and the pool's): it closes now, or with the last
        slice still holding it."""
        self._closed = True
        self._own = None
        self._pool.discard(self)

    def delete(self) -> bool:
        """Close (no fsync) and unlink; True if the file existed."""
        self._release_fd()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: Path) -> None:
        """Rename the file; its descriptor (and every outstanding slice) stays valid, and a
        later reopen uses the new path."""
        with self._pool.lock:
            os.replace(self.path, path)
            self.path = path

    def __repr__(self) -> str:
        return f"FileRecords(path={str(self.path)!r}, size={self._size})"


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    return view if view.ndim == 1 and view.itemsize == 1 else view.cast("B")


def _advance(views: list[memoryview], n: int) -> list[memoryview]:
    """The buffers left after ``n`` bytes of ``views`` were written (a short write)."""
    i = 0
    while i < len(views) and n >= views[i].nbytes:
        n -= views[i].nbytes
        i += 1
    rest = views[i:]
    if rest and n:
        rest[0] = rest[0][n:]
    return rest
