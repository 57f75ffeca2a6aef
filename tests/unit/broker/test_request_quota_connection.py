"""``request_percentage`` through a real KafkaConnection on loopback: a handler that keeps the
event loop busy past its client's quota is answered with the throttle time in its body (a kio
body, or a pre-encoded ``Response``), then the connection handles nothing for that long."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from strata.broker.handlers import build_registry
from strata.broker.network.request_context import Handler, RequestContext, Response
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    REQUEST_PERCENTAGE,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response, encode_body
from strata.protocol.registry import HandlerRegistry

from .helpers import broker_state
from .test_connection import Client, api_versions, registry_with, serve

WINDOW_MS = 200  # 2 samples of 200 ms: a throttle is at most 200 ms


async def _serve(tmp_path: Path, api_key: ApiKey, make: Any) -> tuple[Any, Client]:
    state = broker_state(tmp_path)

    async def busy(ctx: RequestContext, request: Any) -> Any:
        until = time.perf_counter() + 0.05  # 50 ms of the loop: 25 % of a 200 ms window,
        while time.perf_counter() < until:  # against a quota of 1 %
            pass
        return make(ctx.header.api_version)

    if api_key == ApiKey.PRODUCE:  # Produce v0-v2 are advertised but not decodable
        registry: HandlerRegistry[Handler] = HandlerRegistry()
        registry.register(ApiKey.API_VERSIONS, 0, 3,
                          build_registry().lookup(ApiKey.API_VERSIONS, 3))
        registry.register(ApiKey.PRODUCE, 3, 11, busy)
        state.registry = registry
    else:
        state.registry = registry_with(api_key, busy)
    state.quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(2, WINDOW_MS))
    configured, _ = ClientQuotas().alter([Alteration([(CLIENT_ID, "test-client")],
                                                     {REQUEST_PERCENTAGE: 1.0})])
    state.quotas.apply(configured)
    server, port = await serve(state)
    return server, await Client.connect(port)


async def _muted_for(client: Client) -> float:
    """Seconds until the next request (ApiVersions) is answered."""
    started = time.monotonic()
    api_versions(client, 3, 2)
    await client.response(ApiKey.API_VERSIONS, 3)
    return time.monotonic() - started


async def test_a_busy_request_over_the_quota_carries_the_throttle_and_mutes(
        tmp_path: Path) -> None:
    server, client = await _serve(tmp_path, ApiKey.INIT_PRODUCER_ID, lambda version: (
        build_response(ApiKey.INIT_PRODUCER_ID, version, throttle_time_ms=0, error_code=0,
                       producer_id=1, producer_epoch=0)))
    client.send(ApiKey.INIT_PRODUCER_ID, 1, 1, transactional_id=None,
                transaction_timeout_ms=1000)
    _, body = await client.response(ApiKey.INIT_PRODUCER_ID, 1)
    assert body.throttle_time.total_seconds() * 1000 == WINDOW_MS  # bounded at one window
    assert await _muted_for(client) >= 0.8 * WINDOW_MS / 1000
    client.close()
    server.close()


async def test_a_pre_encoded_produce_response_gets_the_throttle_too(tmp_path: Path) -> None:
    def produce_response(version: int) -> Response:
        return Response([encode_body(build_response(
            ApiKey.PRODUCE, version, throttle_time_ms=0, responses=[]))])

    server, client = await _serve(tmp_path, ApiKey.PRODUCE, produce_response)
    client.send(ApiKey.PRODUCE, 9, 1, transactional_id=None, acks=1, timeout_ms=1000,
                topic_data=[])
    _, body = await client.response(ApiKey.PRODUCE, 9)
    assert body.throttle_time.total_seconds() * 1000 == WINDOW_MS
    client.close()
    server.close()
