"""FrameReader: split feeds, many frames per feed, limits, and linear cost."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.protocol.errors import FrameTooLarge, InvalidFrameSize
from strata.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES, FrameReader, frame


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_SOCKET_REQUEST_MAX_BYTES == 104_857_600
    assert FrameReader().max_frame_bytes == 104_857_600


def test_frame_prefixes_the_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_one_frame_in_one_feed() -> None:
    reader = FrameReader()
    reader.feed(frame(b"hello"))
    assert reader.next_frame() == b"hello"
    assert reader.next_frame() is None
    assert reader.at_frame_boundary


def test_frame_split_byte_by_byte_including_the_size_prefix() -> None:
    reader = FrameReader()
    data = frame(b"split payload")
    for byte in data:
        assert reader.next_frame() is None
        reader.feed(bytes([byte]))
        assert not reader.at_frame_boundary
    assert reader.next_frame() == b"split payload"
    assert reader.at_frame_boundary


def test_many_frames_in_one_feed_and_a_partial_tail() -> None:
    payloads = [bytes([i]) * i for i in range(50)]
    data = b"".join(frame(p) for p in payloads) + frame(b"tail")[:6]
    reader = FrameReader()
    reader.feed(data)
    assert list(reader.frames()) == payloads
    assert reader.buffered_bytes == 6
    assert not reader.at_frame_boundary
    reader.feed(frame(b"tail")[6:])
    assert list(reader.frames()) == [b"tail"]
    assert reader.buffered_bytes == 0


def test_empty_frame_is_a_frame() -> None:
    reader = FrameReader()
    reader.feed(frame(b"") + frame(b"x"))
    assert list(reader.frames()) == [b"", b"x"]


def test_accepts_bytearray_and_memoryview_and_returns_bytes() -> None:
    reader = FrameReader()
    reader.feed(bytearray(frame(b"ab")))
    reader.feed(memoryview(frame(b"cd")))
    frames = list(reader.frames())
    assert frames == [b"ab", b"cd"]
    assert all(type(f) is bytes for f in frames)


def test_frame_at_the_limit_is_accepted() -> None:
    reader = FrameReader(max_frame_bytes=10)
    reader.feed(frame(b"0123456789"))
    assert reader.next_frame() == b"0123456789"


def test_oversize_frame_rejected_from_its_size_prefix_alone() -> None:
    reader = FrameReader(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(struct.pack(">i", 11))  # no body bytes were sent at all
    assert caught.value.size == 11
    assert caught.value.max_bytes == 10
    assert caught.value.peer_misbehaved
    assert "socket.request.max.bytes=10" in str(caught.value)
    assert reader.buffered_bytes == 0  # nothing of it is kept
    with pytest.raises(FrameTooLarge):  # the reader stays failed
        reader.feed(b"more")
    with pytest.raises(FrameTooLarge):
        reader.next_frame()


def test_oversize_frame_after_good_ones_is_reported_when_reached() -> None:
    reader = FrameReader(max_frame_bytes=8)
    reader.feed(frame(b"ok") + struct.pack(">i", 1_000_000))
    assert reader.next_frame() == b"ok"
    with pytest.raises(FrameTooLarge):
        reader.next_frame()


def test_oversize_size_prefix_split_across_feeds() -> None:
    reader = FrameReader(max_frame_bytes=100)
    reader.feed(b"\x7f\xff")
    with pytest.raises(FrameTooLarge):
        reader.feed(b"\xff\xff")


def test_negative_size_is_a_protocol_error() -> None:
    reader = FrameReader()
    with pytest.raises(InvalidFrameSize) as caught:
        reader.feed(b"\xff\xff\xff\xfe")
    assert caught.value.size == -2
    assert caught.value.peer_misbehaved
    assert "negative size -2" in str(caught.value)
    with pytest.raises(InvalidFrameSize):
        reader.next_frame()


def test_negative_max_frame_bytes_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="max_frame_bytes"):
        FrameReader(max_frame_bytes=-1)


def test_large_frame_in_small_reads_is_not_copied_repeatedly() -> None:
    # 8 MiB in 4 KiB reads: a quadratic reader would copy ~8 GiB and take minutes; the buffer
    # must never hold more than the frame plus one read.
    body = bytes(range(256)) * (8 * 4096)
    data = frame(body)
    reader = FrameReader()
    chunk = 4096
    for start in range(0, len(data), chunk):
        reader.feed(data[start : start + chunk])
        assert reader.buffered_bytes <= len(data)
    assert reader.next_frame() == body
    assert reader.buffered_bytes == 0


def test_many_small_frames_in_one_large_feed() -> None:
    payloads = [i.to_bytes(4, "big") for i in range(100_000)]
    reader = FrameReader()
    reader.feed(b"".join(frame(p) for p in payloads))
    assert list(reader.frames()) == payloads


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_any_split_of_a_stream_yields_the_same_frames(
    payloads: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(frame(p) for p in payloads)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    reader = FrameReader(max_frame_bytes=300)
    got: list[bytes] = []
    for start, end in itertools.pairwise(points):
        reader.feed(data[start:end])
        got.extend(reader.frames())
    assert got == payloads
    assert reader.at_frame_boundary
