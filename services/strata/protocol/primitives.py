"""Hand-written readers and writers for the Kafka primitive types the codec parses itself.

Owns the few primitives read outside kio: the request header (which must be readable for any
version, including ones kio does not know) and the structural pre-scan of bodies
(``strata.protocol.prescan``). Grammar, all big-endian (Kafka's protocol guide, "Protocol
Primitive Types")::

    INT8 / INT16 / INT32 / INT64  two's complement, 1 / 2 / 4 / 8 bytes
    UNSIGNED_VARINT               7 bits per byte, least significant group first, high bit set on
                                  every byte but the last; at most 5 bytes for 32-bit values
    NULLABLE_STRING               INT16 length N (-1 = null) then N bytes of UTF-8
    COMPACT_*                     UNSIGNED_VARINT length N+1 (0 = null) then N bytes
    TAG_BUFFER                    UNSIGNED_VARINT count, then per field:
                                  UNSIGNED_VARINT tag, UNSIGNED_VARINT size, size bytes

Readers take ``(buffer, offset)`` and return ``(value, next_offset)``; they raise
``WireFormatError`` for truncated or malformed input. That error is internal to the package: the
caller knows the direction and re-raises it as ``InvalidRequest`` or ``InvalidResponse``.
"""

from __future__ import annotations

import struct
from typing import Final, TypeAlias

BytesLike: TypeAlias = bytes | bytearray | memoryview

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
MAX_UNSIGNED_VARINT_BYTES: Final = 5


class WireFormatError(ValueError):
    """Truncated or malformed primitive; re-raised by the caller with the direction attached."""


def read_uvarint(buffer: BytesLike, offset: int, end: int) -> tuple[int, int]:
    """An UNSIGNED_VARINT (32-bit) at ``offset``, not reading at or past ``end``."""
    value = 0
    shift = 0
    for index in range(offset, min(end, offset + MAX_UNSIGNED_VARINT_BYTES)):
        byte = buffer[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    if end - offset >= MAX_UNSIGNED_VARINT_BYTES:
        raise WireFormatError(f"unsigned varint at offset {offset} is longer than 5 bytes")
    raise WireFormatError(f"truncated unsigned varint at offset {offset}")


def write_uvarint(value: int) -> bytes:
    """The UNSIGNED_VARINT encoding of ``0 <= value < 2**32``."""
    if not 0 <= value < 1 << 32:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_int16(buffer: BytesLike, offset: int, end: int) -> tuple[int, int]:
    if end - offset < 2:
        raise WireFormatError(f"truncated int16 at offset {offset}")
    return INT16.unpack_from(buffer, offset)[0], offset + 2


def read_int32(buffer: BytesLike, offset: int, end: int) -> tuple[int, int]:
    if end - offset < 4:
        raise WireFormatError(f"truncated int32 at offset {offset}")
    return INT32.unpack_from(buffer, offset)[0], offset + 4


def read_nullable_string(buffer: BytesLike, offset: int, end: int) -> tuple[str | None, int]:
    """A NULLABLE_STRING (int16 length, -1 = null) decoded as UTF-8 (errors replaced)."""
    length, offset = read_int16(buffer, offset, end)
    if length == -1:
        return None, offset
    if length < 0:
        raise WireFormatError(f"negative string length {length} at offset {offset - 2}")
    if end - offset < length:
        raise WireFormatError(f"string of {length} bytes at offset {offset} is truncated")
    # Kafka decodes with Java's String(bytes, UTF_8): invalid sequences become U+FFFD.
    return str(buffer[offset : offset + length], "utf-8", "replace"), offset + length


def write_nullable_string(value: str | None) -> bytes:
    if value is None:
        return INT16.pack(-1)
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
    return INT16.pack(len(raw)) + raw


def skip_tagged_fields(buffer: BytesLike, offset: int, end: int) -> int:
    """Skip a TAG_BUFFER whose fields are all unknown to the reader; returns the next offset."""
    count, offset = read_uvarint(buffer, offset, end)
    for _ in range(count):
        _tag, offset = read_uvarint(buffer, offset, end)
        size, offset = read_uvarint(buffer, offset, end)
        if end - offset < size:
            raise WireFormatError(f"tagged field of {size} bytes at offset {offset} is truncated")
        offset += size
    return offset
