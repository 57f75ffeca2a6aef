"""``ByteReader``: a cursor over one encoded structure the broker reads outside kio.

Kafka's coordinators persist their state as records whose keys and values use the protocol's
primitive types (``__consumer_offsets``' group and offset records, KIP-848's consumer group
records, ``__transaction_state``), and a classic consumer's Subscription / Assignment bytes use
them too. Each of those decoders reads through one ``ByteReader``; this module owns the
primitives, the decoders own their layouts.

Grammar (Kafka's protocol guide, "Protocol Primitive Types"; ``strata.protocol.primitives``)::

    INT8 / INT16 / INT32 / INT64        big-endian two's complement
    UNSIGNED_VARINT                     at most 5 bytes
    UUID                                16 bytes
    [NULLABLE_]STRING / BYTES / ARRAY   INT16 / INT32 / INT32 length, -1 = null
    COMPACT_*                           UNSIGNED_VARINT length + 1, 0 = null
    TAG_BUFFER                          (compact only) count, then tag, size, size bytes

Invariants:
- ``compact`` (a flexible version) chooses the length encoding of strings, bytes and arrays;
  a non-compact structure has no tagged fields (``tagged_fields`` reads nothing);
- every malformation — truncation, a varint over 5 bytes, a string that is not UTF-8, a null
  where the layout requires a value, an array longer than the bytes left could hold — raises the
  caller's ``error`` class with a message naming it and the offset, never ``struct.error``,
  ``IndexError`` or ``UnicodeDecodeError``; the reader never reads past its data.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from strata.protocol.primitives import MAX_UNSIGNED_VARINT_BYTES

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class ByteReader:
    """Reads primitives from ``data`` at ``pos``; raises ``error`` on malformed input."""

    __slots__ = ("compact", "data", "error", "pos")

    def __init__(self, data: bytes, error: type[Exception], *, compact: bool = False,
                 pos: int = 0) -> None:
        self.data = data
        self.error = error
        self.compact = compact
        self.pos = pos

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def raw(self, size: int) -> bytes:
        """The next ``size`` bytes."""
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise self.error(f"{size} bytes wanted at offset {self.pos} of {len(self.data)}: "
                             "the structure is truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def _fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise self.error(f"an integer of {fmt.size} bytes at offset {self.pos} of "
                             f"{len(self.data)}: the structure is truncated")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        start = self.pos
        value = shift = 0
        for _ in range(MAX_UNSIGNED_VARINT_BYTES):
            if self.pos >= len(self.data):
                raise self.error(f"unsigned varint at offset {start} is truncated")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.error(f"unsigned varint at offset {start} is longer than 5 bytes")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def _length(self, fixed: struct.Struct) -> int:
        """A length prefix: -1 (or less, rejected by callers) for null."""
        return self.uvarint() - 1 if self.compact else self._fixed(fixed)

    def nullable_string(self) -> str | None:
        start = self.pos
        length = self._length(_I16)
        if length == -1:
            return None
        if length < 0:
            raise self.error(f"negative string length {length} at offset {start}")
        try:
            return self.raw(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"string at offset {start} is not UTF-8: {exc}") from None

    def string(self) -> str:
        start = self.pos
        value = self.nullable_string()
        if value is None:
            raise self.error(f"null at offset {start} where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        start = self.pos
        length = self._length(_I32)
        if length == -1:
            return None
        if length < 0:
            raise self.error(f"negative bytes length {length} at offset {start}")
        return self.raw(length)

    def bytes_(self) -> bytes:
        start = self.pos
        value = self.nullable_bytes()
        if value is None:
            raise self.error(f"null at offset {start} where bytes are required")
        return value

    def nullable_array_length(self) -> int:
        """An array's element count; -1 for null. A count the bytes left cannot hold (every
        element takes at least one byte) is refused before anyone loops over it."""
        start = self.pos
        count = self._length(_I32)
        if count < -1:
            raise self.error(f"negative array length {count} at offset {start}")
        if count > self.remaining:
            raise self.error(f"an array of {count} elements at offset {start} cannot fit in "
                             f"the {self.remaining} bytes left")
        return count

    def array_length(self) -> int:
        """An array's element count, a null array read as empty."""
        return max(self.nullable_array_length(), 0)

    def tagged_fields(self) -> dict[int, bytes]:
        """A TAG_BUFFER's fields by tag (nothing to read in a non-compact structure)."""
        fields: dict[int, bytes] = {}
        if self.compact:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                fields[tag] = self.raw(self.uvarint())
        return fields
