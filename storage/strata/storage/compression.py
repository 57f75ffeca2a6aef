"""Compression codecs of RecordBatch v2: codec ids, ``compression.type`` names, compress/decompress.

Pure functions over bytes; no I/O. The codec id lives in bits 0-2 of a batch's ``attributes``; a
compressed batch compresses the records section (everything after ``recordsCount``) as one
payload. Codecs are cramjam's; the framings around them are Kafka's:

``NONE`` (0)
    the records as they are.
``GZIP`` (1)
    a gzip stream (RFC 1952); several concatenated members decompress as one.
``SNAPPY`` (2)
    xerial framing, as Kafka's Java client writes it::

        magic    8 bytes  b"\\x82SNAPPY\\x00"
        version  int32    1   (big-endian; not checked on read: some writers get it wrong)
        compat   int32    1
        blocks   ([int32 length][raw snappy block of that length])...

    ``decompress`` also accepts a bare raw snappy block (librdkafka may send one); ``compress``
    always writes xerial framing with blocks of at most 32 KiB of input.
``LZ4`` (3)
    the LZ4 frame format (magic ``0x184D2204``). Kafka's Java client reads each block on its
    own, so ``compress`` writes independent 64 KiB blocks, no block or content checksum and no
    content size: FLG ``0x60``, BD ``0x40``, HC = second byte of xxHash32(FLG BD). Any valid frame
    decompresses.
``ZSTD`` (4)
    zstd frames (with or without the content size); concatenated frames decompress as one.

Invariants: ``decompress(c, compress(c, data)) == data`` for every codec; any malformed input to
``decompress`` raises ``CorruptRecordError`` (never a codec library's exception); an unknown
codec id raises ``UnsupportedCompressionTypeError``. ``decompress_bounded`` never holds more
than ``max_size + 1`` decompressed bytes, whatever the input claims (a small "compression bomb"
is refused with ``RecordTooLargeError`` before it can take the broker's memory).
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from strata.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """Kafka's codec ids (``CompressionType`` in the Java client)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def config_name(self) -> str:
        """The lowercase name Kafka uses in configs: ``none``, ``gzip``, ..."""
        return self.name.lower()

    @classmethod
    def for_id(cls, codec_id: int) -> CompressionType:
        """The codec with this id; ``UnsupportedCompressionTypeError`` for ids 5-7 (or others)."""
        try:
            return cls(codec_id)
        except ValueError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression codec id {codec_id}; Kafka knows 0 (none) to 4 (zstd)"
            ) from None

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """The codec named by a producer-side ``compression.type`` (``none``, ``gzip``, ...)."""
        codec = _BY_NAME.get(name.strip().lower())
        if codec is None:
            raise InvalidConfigError(f"unknown compression type {name!r}")
        return codec


_BY_NAME: dict[str, CompressionType] = {c.name.lower(): c for c in CompressionType}
_BY_NAME["uncompressed"] = CompressionType.NONE  # the topic-config spelling of NONE

PRODUCER = "producer"
"""The topic-level ``compression.type`` that keeps whatever codec the producer used."""

BROKER_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", PRODUCER)
"""Values of the topic/broker ``compression.type`` config (Kafka's BrokerCompressionType)."""


def target_compression_type(compression_type: str, source: int) -> CompressionType:
    """The codec a log stores, given the topic's ``compression.type`` and the producer's codec.

    ``producer`` keeps ``source``; ``uncompressed`` (or ``none``) and the codec names force that
    codec.
    """
    if compression_type.strip().lower() == PRODUCER:
        return CompressionType.for_id(source)
    return CompressionType.for_name(compression_type)


# ---------------------------------------------------------------------------------------- snappy
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(XERIAL_HEADER)  # 16
_XERIAL_BLOCK_SIZE = 32 * 1024
_I = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        out += _I.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CorruptRecordError("snappy: xerial header truncated")
    out = bytearray()
    pos, end = _XERIAL_HEADER_SIZE, len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"snappy: xerial block length truncated at byte {pos}")
        (length,) = _I.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptRecordError(
                f"snappy: xerial block of {length} bytes at byte {pos} exceeds the payload"
            )
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


# ------------------------------------------------------------------------------------------- lz4
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size, no dict id
_LZ4_BD = 0x40  # block maximum size 64 KiB
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_U32LE = struct.Struct("<I")

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (all the LZ4 frame descriptor checksum ever needs)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short covers inputs under 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = _U32LE.unpack_from(data, pos)
        h = (_rotl32((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl32((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_HEADER = (
    LZ4_FRAME_MAGIC
    + bytes((_LZ4_FLG, _LZ4_BD))
    + bytes(((xxh32_short(bytes((_LZ4_FLG, _LZ4_BD))) >> 8) & 0xFF,))
)


def _lz4_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_LZ4_HEADER)
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _U32LE.pack(len(block))
            out += block
        else:  # incompressible: stored as is, flagged by the high bit of the size
            out += _U32LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT)
            out += chunk
    out += b"\x00\x00\x00\x00"  # EndMark
    return bytes(out)


def _lz4_decompress(data: Buffer) -> bytes:
    return bytes(cramjam.lz4.decompress(data))


# ------------------------------------------------------------------------------------ dispatch
def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` applies to gzip and zstd."""
    c = CompressionType.for_id(codec)
    if c is CompressionType.NONE:
        return bytes(data)
    if c is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if c is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if c is CompressionType.LZ4:
        return _lz4_compress(data)
    return bytes(cramjam.zstd.compress(data, level=level))


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a records section; ``CorruptRecordError`` if ``data`` is not valid ``codec``."""
    c = CompressionType.for_id(codec)
    try:
        if c is CompressionType.NONE:
            return bytes(data)
        if c is CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if c is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if c is CompressionType.LZ4:
            return _lz4_decompress(data)
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(
            f"records compressed with {c.config_name} fail to decompress: {exc}"
        ) from None


def decompress_bounded(codec: int, data: Buffer, max_size: int) -> bytes:
    """``decompress`` that refuses (``RecordTooLargeError``) output larger than ``max_size``
    bytes, decompressing into a buffer of ``max_size + 1`` bytes so memory stays bounded."""
    c = CompressionType.for_id(codec)
    if c is CompressionType.NONE:
        if len(data) > max_size:
            raise RecordTooLargeError(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    if c is CompressionType.SNAPPY:
        _check_snappy_size(memoryview(data), max_size)
        return decompress(codec, data)
    out = bytearray(max_size + 1)
    module = {CompressionType.GZIP: cramjam.gzip, CompressionType.LZ4: cramjam.lz4,
              CompressionType.ZSTD: cramjam.zstd}[c]
    try:
        written = int(module.decompress_into(data, out))
    except cramjam.DecompressionError as exc:
        if "failed to write whole buffer" in str(exc):
            raise RecordTooLargeError(
                f"records compressed with {c.config_name} decompress to more than "
                f"{max_size} bytes") from None
        raise CorruptRecordError(
            f"records compressed with {c.config_name} fail to decompress: {exc}") from None
    if written > max_size:
        raise RecordTooLargeError(
            f"records compressed with {c.config_name} decompress to more than {max_size} bytes")
    del out[written:]
    return bytes(out)


def _check_snappy_size(view: memoryview, max_size: int) -> None:
    """The decompressed size of a snappy payload (raw or xerial-framed), from the length each
    raw block states, checked against ``max_size`` before anything is decompressed."""
    try:
        if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
            total = int(cramjam.snappy.decompress_raw_len(view))
        else:
            total, pos = 0, _XERIAL_HEADER_SIZE
            while pos + 4 <= len(view) and total <= max_size:
                (length,) = _I.unpack_from(view, pos)
                pos += 4
                if length < 0 or length > len(view) - pos:
                    return  # malformed: decompress() names the defect
                total += int(cramjam.snappy.decompress_raw_len(view[pos : pos + length]))
                pos += length
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"records compressed with snappy fail to decompress: {exc}"
                                 ) from None
    if total > max_size:
        raise RecordTooLargeError(
            f"records compressed with snappy decompress to more than {max_size} bytes")
