"""compression: codec ids and names, round trips, Kafka's framings, and errors on bad input.

Third-party codec libraries (lz4, python-snappy via cramjam, zstandard, gzip) decode what we
encode and encode what we decode, so the framings are checked against code we did not write.
"""

import gzip
import os
import struct

import cramjam
import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard

from strata.storage import compression as comp
from strata.storage.compression import CompressionType, compress, decompress
from strata.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)

CODECS = list(CompressionType)
PAYLOADS = {
    "empty": b"",
    "one-byte": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 5_000,  # 220 KB, > 1 block
    "random": os.urandom(70_000),  # incompressible, > one 64 KiB lz4 block
}


def test_ids_and_names_are_kafkas() -> None:
    assert [(c.name, int(c)) for c in CompressionType] == [
        ("NONE", 0), ("GZIP", 1), ("SNAPPY", 2), ("LZ4", 3), ("ZSTD", 4),
    ]  # fmt: skip
    assert [c.config_name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize(
    ("name", "codec"),
    [("none", 0), ("uncompressed", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4),
     ("ZSTD", 4), (" Lz4 ", 3)],
)  # fmt: skip
def test_for_name(name: str, codec: int) -> None:
    assert CompressionType.for_name(name) == codec


@pytest.mark.parametrize("name", ["producer", "brotli", ""])
def test_for_name_rejects_non_codecs(name: str) -> None:
    with pytest.raises(InvalidConfigError, match="compression type"):
        CompressionType.for_name(name)


def test_broker_config_values_all_resolve() -> None:
    for value in comp.BROKER_COMPRESSION_TYPES:
        assert isinstance(comp.target_compression_type(value, 2), CompressionType)


@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
def test_producer_keeps_the_source_codec(source: int) -> None:
    assert comp.target_compression_type("producer", source) == source


def test_a_named_codec_overrides_the_source() -> None:
    assert comp.target_compression_type("gzip", 3) is CompressionType.GZIP
    assert comp.target_compression_type("uncompressed", 4) is CompressionType.NONE
    assert comp.target_compression_type("zstd", 0) is CompressionType.ZSTD


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1])
def test_unknown_codec_id(codec_id: int) -> None:
    for call in (
        lambda: CompressionType.for_id(codec_id),
        lambda: compress(codec_id, b"abc"),
        lambda: decompress(codec_id, b"abc"),
        lambda: comp.target_compression_type("producer", codec_id),
    ):
        with pytest.raises(UnsupportedCompressionTypeError, match=str(codec_id)) as exc:
            call()
        assert exc.value.error_code == 76
        assert exc.value.error_name == "UNSUPPORTED_COMPRESSION_TYPE"


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_round_trip(codec: CompressionType, payload: bytes) -> None:
    packed = compress(codec, payload)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == payload
    assert decompress(codec, memoryview(bytearray(packed))) == payload


def test_compression_shrinks_repetitive_data() -> None:
    data = PAYLOADS["text"]
    for codec in CODECS[1:]:
        assert len(compress(codec, data)) < len(data) // 10, codec


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
def test_level(codec: CompressionType) -> None:
    data = PAYLOADS["text"]
    fast, best = compress(codec, data, level=1), compress(codec, data, level=9)
    assert decompress(codec, fast) == decompress(codec, best) == data


# ------------------------------------------------------------------------------------- snappy
def test_snappy_writes_xerial_framing() -> None:
    data = PAYLOADS["text"]
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(snappy.uncompress(packed[pos + 4 : pos + 4 + length]))  # raw blocks
        pos += 4 + length
    assert pos == len(packed)
    assert all(len(b) <= 32 * 1024 for b in blocks) and len(blocks) == 7
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks_like_librdkafka_sends() -> None:
    data = PAYLOADS["text"]
    assert decompress(CompressionType.SNAPPY, snappy.compress(data)) == data
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(b"hi"))) == b"hi"


def test_snappy_ignores_xerial_version_fields() -> None:
    block = snappy.compress(b"payload")
    little_endian_header = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1)  # as some writers do
    framed = little_endian_header + struct.pack(">i", len(block)) + block
    assert decompress(CompressionType.SNAPPY, framed) == b"payload"


@pytest.mark.parametrize(
    "framed",
    [
        b"\x82SNAPPY\x00\x00\x00",  # header truncated
        comp.XERIAL_HEADER + b"\x00\x00",  # block length truncated
        comp.XERIAL_HEADER + struct.pack(">i", 100) + b"abc",  # block past the end
        comp.XERIAL_HEADER + struct.pack(">i", -5) + b"abc",  # negative length
        comp.XERIAL_HEADER + struct.pack(">i", 3) + b"\xff\xff\xff",  # bad snappy block
    ],
)
def test_snappy_bad_xerial_is_corrupt(framed: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, framed)


# ---------------------------------------------------------------------------------------- lz4
def test_xxh32_known_vectors() -> None:
    assert comp.xxh32_short(b"") == 0x02CC5D05
    assert comp.xxh32_short(b"a") == 0x550D7456
    assert comp.xxh32_short(b"abc") == 0x32D153FF
    with pytest.raises(ValueError, match="16"):
        comp.xxh32_short(b"x" * 16)


def test_lz4_frame_is_what_kafka_java_reads() -> None:
    data = PAYLOADS["text"] + PAYLOADS["random"]
    packed = compress(CompressionType.LZ4, data)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd, hc = packed[4], packed[5], packed[6]
    assert flg == 0x60 and bd == 0x40  # v01, independent blocks, no checksums; 64 KiB blocks
    assert hc == (comp.xxh32_short(packed[4:6]) >> 8) & 0xFF
    assert lz4.frame.decompress(packed) == data  # the reference library checks HC too
    # Every block decodes on its own (what KafkaLZ4BlockInputStream does).
    pos, out = 7, bytearray()
    while True:
        (size,) = struct.unpack_from("<I", packed, pos)
        pos += 4
        if size == 0:
            break
        block = packed[pos : pos + (size & 0x7FFFFFFF)]
        pos += size & 0x7FFFFFFF
        if size & 0x80000000:
            out += block
        else:
            out += lz4.block.decompress(block, uncompressed_size=64 * 1024)
    assert pos == len(packed) and bytes(out) == data


def test_lz4_reads_other_frames() -> None:
    data = PAYLOADS["text"]
    for frame in (
        lz4.frame.compress(data, block_linked=False, content_checksum=True),
        lz4.frame.compress(data, block_linked=True, store_size=True),
        bytes(cramjam.lz4.compress(data)),
    ):
        assert decompress(CompressionType.LZ4, frame) == data


# ------------------------------------------------------------------------------- gzip, zstd
def test_gzip_and_zstd_interoperate() -> None:
    data = PAYLOADS["text"]
    assert gzip.decompress(compress(CompressionType.GZIP, data)) == data
    assert decompress(CompressionType.GZIP, gzip.compress(data)) == data
    member = gzip.compress(b"ab")
    assert decompress(CompressionType.GZIP, member + member) == b"abab"
    assert zstandard.ZstdDecompressor().decompress(compress(CompressionType.ZSTD, data)) == data
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(CompressionType.ZSTD, streamed) == data


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.config_name)
def test_garbage_is_corrupt(codec: CompressionType) -> None:
    valid = compress(codec, PAYLOADS["text"])
    for bad in (b"", b"definitely not compressed data", valid[: len(valid) // 2]):
        with pytest.raises(CorruptRecordError, match=codec.config_name) as exc:
            decompress(codec, bad)
        assert exc.value.error_code == 2


# ------------------------------------------------------------------------ bounded decompression
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_bounded_decompression_keeps_what_fits_and_refuses_a_bomb(codec: CompressionType) -> None:
    data = PAYLOADS["text"]
    packed = compress(codec, data)
    assert comp.decompress_bounded(codec, packed, len(data)) == data
    with pytest.raises(RecordTooLargeError):
        comp.decompress_bounded(codec, packed, len(data) - 1)
    bomb = compress(codec, bytes(64 * 1024 * 1024))  # 64 MiB of zeros, tiny once compressed
    with pytest.raises(RecordTooLargeError, match="1024"):
        comp.decompress_bounded(codec, bomb, 1024)


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.config_name)
def test_bounded_decompression_of_garbage_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError, match=codec.config_name):
        comp.decompress_bounded(codec, b"definitely not compressed data", 1 << 20)


def test_bounded_decompression_reads_raw_snappy_and_other_frames() -> None:
    data = PAYLOADS["text"]
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert comp.decompress_bounded(CompressionType.SNAPPY, raw, len(data)) == data
    with pytest.raises(RecordTooLargeError):
        comp.decompress_bounded(CompressionType.SNAPPY, raw, len(data) - 1)
    assert comp.decompress_bounded(CompressionType.GZIP, gzip.compress(data), len(data)) == data
    linked = lz4.frame.compress(data, block_linked=True, store_size=True)
    assert comp.decompress_bounded(CompressionType.LZ4, linked, len(data)) == data
