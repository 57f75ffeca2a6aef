"""KafkaConnection over real loopback sockets, in process: ordering, the ApiVersions fallback,
protocol violations closing only their connection, Response chunks with sendfile, errors."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import build_registry
from strata.broker.network.connection import (
    INLINE_SLICE_BYTES,
    MAX_QUEUED_FRAMES,
    KafkaConnection,
    RequestQueueLimit,
)
from strata.broker.network.request_context import Handler, RequestContext, Response
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_response, encode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import build_request
from strata.protocol.registry import HandlerRegistry
from strata.storage.descriptor_pool import DESCRIPTOR_POOL
from strata.storage.file_records import FileRecords, FileSlice

from .helpers import broker_state

TIMEOUT = 10.0


class Client:
    """A raw Kafka client: writes request frames, reads response frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, api_key: int, version: int, correlation_id: int, **fields: Any) -> None:
        header = RequestHeader(api_key, version, correlation_id, "test-client")
        self.writer.write(encode_request(header, build_request(api_key, version, fields)))

    async def frame(self) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), TIMEOUT))[0]
        return await asyncio.wait_for(self.reader.readexactly(size), TIMEOUT)

    async def response(self, api_key: int, version: int) -> tuple[int, Any]:
        return decode_response(await self.frame(), api_key, version)

    async def closed_by_peer(self) -> bool:
        try:
            data = await asyncio.wait_for(self.reader.read(), TIMEOUT)
        except ConnectionError:
            return True
        finally:
            self.close()
        return data == b""

    def close(self) -> None:
        self.writer.close()


async def serve(state: BrokerState) -> tuple[asyncio.AbstractServer, int]:
    loop = asyncio.get_running_loop()
    limit = RequestQueueLimit(state.config.queued_max_requests)
    server = await loop.create_server(
        lambda: KafkaConnection(state, limit, lambda _: None), "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerState, int]]:
    state = broker_state(tmp_path)
    state.registry = build_registry()
    server, port = await serve(state)
    yield state, port
    server.close()


def api_versions(client: Client, version: int, correlation_id: int) -> None:
    client.send(ApiKey.API_VERSIONS, version, correlation_id,
                client_software_name="strata-test", client_software_version="1.0")


async def test_api_versions_lists_the_registry(broker: tuple[BrokerState, int]) -> None:
    state, port = broker
    client = await Client.connect(port)
    api_versions(client, 3, 1)
    correlation_id, body = await client.response(ApiKey.API_VERSIONS, 3)
    assert correlation_id == 1 and body.error_code == ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == {
        k: (v.min_version, v.max_version) for k, v in state.registry.version_ranges().items()}
    client.close()


async def test_unknown_api_versions_version_gets_the_v0_fallback_and_stays_open(
    broker: tuple[BrokerState, int],
) -> None:
    state, port = broker
    client = await Client.connect(port)
    header = RequestHeader(ApiKey.API_VERSIONS, 99, 42, "future")
    payload = encode_request_header(header, 2) + b"\x00\x00\x00"
    client.writer.write(struct.pack(">i", len(payload)) + payload)
    frame = await client.frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
    assert (correlation_id, error_code) == (42, ErrorCode.unsupported_version)
    assert count == len(state.registry.version_ranges())
    assert len(frame) == 10 + 6 * count
    api_versions(client, 0, 43)  # the client retries with a listed version
    assert (await client.response(ApiKey.API_VERSIONS, 0))[0] == 43
    client.close()


async def test_an_api_not_served_is_answered_unsupported_version_and_stays_open(
    broker: tuple[BrokerState, int],
) -> None:
    _, port = broker
    client = await Client.connect(port)
    client.send(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 7, broker_id=1, broker_epoch=1)
    correlation_id, body = await client.response(ApiKey.ALLOCATE_PRODUCER_IDS, 0)
    assert (correlation_id, body.error_code) == (7, ErrorCode.unsupported_version)
    api_versions(client, 3, 8)  # the connection still serves
    assert (await client.response(ApiKey.API_VERSIONS, 3))[0] == 8
    client.close()


async def test_pipelined_requests_are_answered_in_order(broker: tuple[BrokerState, int]) -> None:
    _, port = broker
    client = await Client.connect(port)
    for correlation_id in range(20):
        if correlation_id % 2:
            client.send(ApiKey.METADATA, 8, correlation_id, topics=None,
                        allow_auto_topic_creation=False,
                        include_cluster_authorized_operations=False,
                        include_topic_authorized_operations=False)
        else:
            api_versions(client, 3, correlation_id)
    for correlation_id in range(20):
        key, version = ((ApiKey.METADATA, 8) if correlation_id % 2
                        else (ApiKey.API_VERSIONS, 3))
        assert (await client.response(key, version))[0] == correlation_id
    client.close()


@pytest.mark.parametrize(
    "payload",
    [
        b"\x01\x02",  # shorter than a request header
        struct.pack(">hhih", ApiKey.METADATA, 99, 1, -1),  # a version we do not serve
        struct.pack(">hhih", 999, 0, 1, -1),  # an api key we do not serve
        struct.pack(">hhih", ApiKey.METADATA, 8, 1, -1) + b"\xff" * 7,  # a garbage body
    ],
)
async def test_protocol_violations_close_only_that_connection(
    broker: tuple[BrokerState, int], payload: bytes
) -> None:
    _, port = broker
    bystander = await Client.connect(port)
    offender = await Client.connect(port)
    offender.writer.write(struct.pack(">i", len(payload)) + payload)
    assert await offender.closed_by_peer()
    api_versions(bystander, 3, 5)
    assert (await bystander.response(ApiKey.API_VERSIONS, 3))[0] == 5
    bystander.close()


async def test_frame_over_socket_request_max_bytes_closes(tmp_path: Path) -> None:
    state = broker_state(tmp_path, socket_request_max_bytes="1000")
    state.registry = build_registry()
    server, port = await serve(state)
    client = await Client.connect(port)
    client.writer.write(struct.pack(">i", 1001))
    assert await client.closed_by_peer()
    server.close()


def registry_with(api_key: ApiKey, handler: Handler) -> HandlerRegistry[Handler]:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    registry.register(ApiKey.API_VERSIONS, 0, 3, build_registry().lookup(ApiKey.API_VERSIONS, 3))
    if api_key != ApiKey.API_VERSIONS:
        registry.register(api_key, *_range(api_key), handler)
    return registry


def _range(api_key: ApiKey) -> tuple[int, int]:
    served = build_registry().version_ranges()[api_key]
    return served.min_version, served.max_version


def handler_returning(make: Callable[[], Any]) -> Handler:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        return make()

    return handle


async def serve_one_api(tmp_path: Path, api_key: ApiKey,
                        make: Callable[[], Any]) -> tuple[asyncio.AbstractServer, Client]:
    """A server answering ApiVersions and ``api_key`` (with ``make()``), and a client of it."""
    state = broker_state(tmp_path)
    state.registry = registry_with(api_key, handler_returning(make))
    server, port = await serve(state)
    return server, await Client.connect(port)


@pytest.mark.parametrize("size", [10, 8 * 1024 * 1024])
async def test_response_chunks_with_file_slices(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(b"0123456789" + data)
    fd = os.open(path, os.O_RDONLY)
    try:
        server, client = await serve_one_api(tmp_path, ApiKey.METADATA, lambda: Response(
            [b"head", FileSlice(fd, 10, size), b"", FileSlice(fd, 0, 0), b"tail"]))
        for correlation_id in (1, 2):  # twice: the connection stays usable after a big slice
            client.send(ApiKey.METADATA, 0, correlation_id, topics=[])
            frame = await client.frame()
            assert frame[:4] == struct.pack(">i", correlation_id)
            assert frame[4:8] == b"head"
            assert frame[8:-4] == data
            assert frame[-4:] == b"tail"
        client.close()
        server.close()
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [1, INLINE_SLICE_BYTES, INLINE_SLICE_BYTES + 1])
async def test_small_file_slices_go_out_with_the_frame_and_large_ones_by_sendfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A slice up to ``INLINE_SLICE_BYTES`` is read and written with the rest of the frame (no
    ``sendfile``); a larger one still goes out zero-copy; the bytes are the same either way."""
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(data + b"after")
    sendfiles: list[int] = []
    real_sendfile = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sendfiles.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting)
    fd = os.open(path, os.O_RDONLY)
    try:
        server, client = await serve_one_api(tmp_path, ApiKey.METADATA, lambda: Response(
            [b"head", FileSlice(fd, 0, size), FileSlice(fd, size, 5), b"tail"]))
        client.send(ApiKey.METADATA, 0, 7, topics=[])
        frame = await client.frame()
        assert frame == struct.pack(">i", 7) + b"head" + data + b"after" + b"tail"
        assert bool(sendfiles) == (size > INLINE_SLICE_BYTES)
        client.close()
        server.close()
    finally:
        os.close(fd)


async def test_a_slice_sent_while_its_segment_is_evicted_and_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inactive segment's slice handed to the connection keeps its descriptor: when the
    pool evicts the segment and the segment is deleted between two ``sendfile`` calls, and
    other files are opened meanwhile (taking any fd number freed), the client still gets the
    segment's bytes."""
    data = os.urandom(8 * 1024 * 1024)
    records = FileRecords.open(tmp_path / "00000000000000000000.log")
    records.append(data)
    records.make_inactive()  # a rolled segment: its descriptor is the pool's
    others: list[int] = []
    real_sendfile = os.sendfile

    def evicting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        if not others:
            DESCRIPTOR_POOL.evict_all()
            records.delete()
            for i in range(16):
                others.append(os.open(tmp_path / f"other-{i}", os.O_CREAT | os.O_RDWR))
                os.write(others[-1], b"X" * 4096)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", evicting)
    try:
        server, client = await serve_one_api(tmp_path, ApiKey.METADATA, lambda: Response(
            [b"head", records.slice(0, len(data)), b"tail"]))
        client.send(ApiKey.METADATA, 0, 3, topics=[])
        frame = await client.frame()
        assert others and not records.path.exists()
        assert frame == struct.pack(">i", 3) + b"head" + data + b"tail"
        client.close()
        server.close()
    finally:
        for fd in others:
            os.close(fd)


async def test_no_response_when_the_handler_returns_none(tmp_path: Path) -> None:
    server, client = await serve_one_api(tmp_path, ApiKey.METADATA, lambda: None)
    client.send(ApiKey.METADATA, 0, 1, topics=[])
    api_versions(client, 3, 2)
    assert (await client.response(ApiKey.API_VERSIONS, 3))[0] == 2
    client.close()
    server.close()


def failing() -> Any:
    raise RuntimeError("boom")


async def test_handler_failure_answers_unknown_server_error_where_there_is_a_field(
    tmp_path: Path,
) -> None:
    server, client = await serve_one_api(tmp_path, ApiKey.INIT_PRODUCER_ID, failing)
    client.send(ApiKey.INIT_PRODUCER_ID, 1, 9, transactional_id=None,
                transaction_timeout_ms=1000)
    correlation_id, body = await client.response(ApiKey.INIT_PRODUCER_ID, 1)
    assert (correlation_id, body.error_code) == (9, ErrorCode.unknown_server_error)
    client.close()
    server.close()


async def test_handler_failure_closes_when_the_response_has_no_error_field(
    tmp_path: Path,
) -> None:
    server, client = await serve_one_api(tmp_path, ApiKey.METADATA, failing)
    client.send(ApiKey.METADATA, 0, 1, topics=[])
    assert await client.closed_by_peer()
    server.close()


class HeldRequests:
    """A server whose Metadata handler holds every request until ``release`` (acks=all
    produces waiting for their followers), with a ``queued.max.requests`` of ``LIMIT``."""

    LIMIT = 20

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.limit = RequestQueueLimit(self.LIMIT)

    async def serve(self, tmp_path: Path) -> tuple[asyncio.AbstractServer, int]:
        async def held(ctx: RequestContext, request: Any) -> Any:
            await self.release.wait()
            return None  # no response needed: the tests count what was queued

        state = broker_state(tmp_path)
        state.registry = registry_with(ApiKey.METADATA, held)
        server = await asyncio.get_running_loop().create_server(
            lambda: KafkaConnection(state, self.limit, lambda _: None), "127.0.0.1", 0)
        return server, int(server.sockets[0].getsockname()[1])

    @staticmethod
    async def pipeline(client: Client, count: int) -> None:
        """``count`` held requests in one write."""
        client.writer.write(b"".join(
            encode_request(RequestHeader(ApiKey.METADATA, 0, correlation_id, "pipelining"),
                           build_request(ApiKey.METADATA, 0, {"topics": []}))
            for correlation_id in range(count)))
        await client.writer.drain()


async def test_one_connection_pipelining_small_requests_leaves_the_others_reading(
    tmp_path: Path,
) -> None:
    """600 requests in one write, each held by its handler (acks=all produces waiting for
    followers): the connection queues ``MAX_QUEUED_FRAMES`` of them, not all 600, so the
    broker-wide ``queued.max.requests`` (20 here) stays open and another connection (a
    follower's fetches, which those produces wait for) keeps being read and answered."""
    held = HeldRequests()
    server, port = await held.serve(tmp_path)
    pipelining, other = await Client.connect(port), await Client.connect(port)
    try:
        await held.pipeline(pipelining, 600)
        for correlation_id in (1, 2, 3):  # still read: the limit never filled
            api_versions(other, 3, correlation_id)
            assert (await other.response(ApiKey.API_VERSIONS, 3))[0] == correlation_id
        assert held.limit.queued <= MAX_QUEUED_FRAMES
        held.release.set()
        api_versions(pipelining, 3, 600)  # the held ones drain in order, then this is answered
        assert (await pipelining.response(ApiKey.API_VERSIONS, 3))[0] == 600
        assert held.limit.queued == 0
    finally:
        pipelining.close()
        other.close()
        server.close()


async def test_a_full_request_queue_still_reads_each_idle_connection(tmp_path: Path) -> None:
    """Connections pipelining held requests fill ``queued.max.requests`` (20 here: two of them
    queue 16 each behind the request in hand); a connection with nothing queued is still read,
    one request at a time — as Kafka, whose queue holds at most one request per connection, so
    a follower's next fetch is never stuck behind producers waiting for that very fetch."""
    held = HeldRequests()
    server, port = await held.serve(tmp_path)
    pipelining = [await Client.connect(port) for _ in range(2)]
    other = await Client.connect(port)
    try:
        for client in pipelining:
            await held.pipeline(client, 40)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while not held.limit.full:  # both have read ahead as far as they may
            assert loop.time() < deadline, held.limit.queued
            await asyncio.sleep(0.01)
        for correlation_id in (1, 2, 3):
            api_versions(other, 3, correlation_id)
            assert (await other.response(ApiKey.API_VERSIONS, 3))[0] == correlation_id
        # The limit, and at most one request of the connection that had nothing queued.
        assert held.limit.queued <= HeldRequests.LIMIT + 1
        held.release.set()
        for client in pipelining:
            api_versions(client, 3, 40)
            assert (await client.response(ApiKey.API_VERSIONS, 3))[0] == 40
        assert held.limit.queued == 0
    finally:
        for client in (*pipelining, other):
            client.close()
        server.close()
