"""The request quota's pure parts: a request's thread time (only its handler's steps count),
its charge (Kafka's throttle, bounded at one window), network time recorded without throttling,
exempt requests, and the throttle time put into an answer already built."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from strata.broker.network.request_context import Response
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.broker.quotas.request_quotas import answer_throttle_time, request_quota_exempt
from strata.broker.quotas.request_time import RequestTime
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import build_response, decode_response_body, encode_body

SECOND_NS = 1_000_000_000


class FakeNanos:
    """A ``perf_counter_ns`` that moves only when told."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _quotas(tmp_path: Path, percentage: float = 10.0) -> BrokerQuotas:
    quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    configured, _ = ClientQuotas().alter([Alteration(
        [(CLIENT_ID, "busy")], {REQUEST_PERCENTAGE: percentage, PRODUCER_BYTE_RATE: 1000})])
    quotas.apply(configured)
    return quotas


async def test_only_the_handlers_steps_count_not_its_waits(tmp_path: Path) -> None:
    clock = FakeNanos()
    request_time = RequestTime(_quotas(tmp_path).request, "", "busy", clock=clock)
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def handler() -> int:
        clock.now += 3_000_000  # a 3 ms step
        value = await gate
        clock.now += 2_000_000  # and a 2 ms one after the wait
        return value * 2

    async def run() -> int:
        return await request_time.timed(handler())

    task = asyncio.ensure_future(run())
    await asyncio.sleep(0)
    assert request_time.busy_ns == 3_000_000
    clock.now += SECOND_NS  # a long poll: a second passes while it waits
    gate.set_result(21)
    assert await task == 42
    assert request_time.busy_ns == 5_000_000


async def test_errors_and_cancellation_reach_the_handler_and_its_time_still_counts(
        tmp_path: Path) -> None:
    clock = FakeNanos()
    request_time = RequestTime(_quotas(tmp_path).request, "", "busy", clock=clock)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def failing() -> None:
        clock.now += 1_000_000
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await request_time.timed(failing())
    assert request_time.busy_ns == 1_000_000

    async def waiting() -> None:
        try:
            await gate
        except asyncio.CancelledError:
            clock.now += 1_000_000
            seen.append("cancelled")
            raise

    async def run() -> None:
        await request_time.timed(waiting())

    task = asyncio.ensure_future(run())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"] and request_time.busy_ns == 2_000_000


def test_over_the_quota_the_throttle_is_kafkas_bounded_at_one_window(tmp_path: Path) -> None:
    quotas = _quotas(tmp_path, percentage=10.0)
    small = RequestTime(quotas.request, "", "busy", clock=FakeNanos())
    small.add(SECOND_NS // 2)  # 0.5 s of the loop = 50 %-seconds over >= 10 s: 5 %
    assert small.charge(0) == 0
    big = RequestTime(quotas.request, "", "busy", clock=FakeNanos())
    big.add(SECOND_NS)  # now 150 %-seconds over 10 s: 15 % against 10 %
    # (15 - 10) / 10 x 10 000 ms = 5 000 ms, bounded at one 1 s window
    assert big.charge(0) == 1000
    assert quotas.request.rate("", "busy", 0) == pytest.approx(15.0, rel=0.01)
    # a byte-rate throttle keeps the whole quota window as its bound
    assert quotas.produce.record_and_get_throttle_time_ms("", "busy", 10**6, 0) == 11_000
    # another client has no request quota: never measured
    other = RequestTime(quotas.request, "", "other", clock=FakeNanos())
    other.add(10 * SECOND_NS)
    assert other.charge(0) == 0
    assert ("", "other") not in quotas.request.measured(0)


def test_time_after_the_charge_counts_against_the_next_request_without_throttling(
        tmp_path: Path) -> None:
    quotas = _quotas(tmp_path, percentage=10.0)
    request_time = RequestTime(quotas.request, "", "busy", clock=FakeNanos())
    request_time.add(SECOND_NS // 10)
    assert request_time.charge(0) == 0
    request_time.add(2 * SECOND_NS)  # writing a big response, say
    request_time.finish(0)
    request_time.finish(0)  # nothing new: nothing recorded twice
    assert quotas.request.rate("", "busy", 0) == pytest.approx(21.0, rel=0.01)
    assert ("", "busy") not in quotas.request.throttles
    assert request_time.charge(0) == 0  # only the first charge may throttle
    following = RequestTime(quotas.request, "", "busy", clock=FakeNanos())
    assert following.charge(0) > 0  # the next request pays for it


def test_exempt_requests_are_measured_apart_and_never_throttled(tmp_path: Path) -> None:
    quotas = _quotas(tmp_path, percentage=1.0)
    assert quotas.request.exempt_rate(0) is None
    exempt = RequestTime(quotas.request, "", "busy", exempt=True, clock=FakeNanos())
    exempt.add(5 * SECOND_NS)
    assert exempt.charge(0) == 0
    exempt.add(SECOND_NS)
    exempt.finish(0)
    assert quotas.request.exempt_rate(0) == pytest.approx(60.0, rel=0.01)
    assert quotas.request.measured(0) == {}


def test_which_requests_kafka_exempts() -> None:
    assert request_quota_exempt(ApiKey.WRITE_TXN_MARKERS, False, True)
    assert request_quota_exempt(ApiKey.BROKER_HEARTBEAT, False, True)
    assert not request_quota_exempt(ApiKey.DESCRIBE_QUORUM, False, True)  # an admin tool's
    # what Kafka's SASL authenticator answers never reaches KafkaApis ...
    assert request_quota_exempt(ApiKey.SASL_HANDSHAKE, True, False)
    assert request_quota_exempt(ApiKey.SASL_AUTHENTICATE, True, True)  # re-authentication
    assert request_quota_exempt(ApiKey.API_VERSIONS, True, False)
    # ... but once logged in, or on a listener without SASL, KafkaApis throttles them
    assert not request_quota_exempt(ApiKey.API_VERSIONS, True, True)
    assert not request_quota_exempt(ApiKey.API_VERSIONS, False, True)
    assert not request_quota_exempt(ApiKey.SASL_HANDSHAKE, False, True)
    assert not request_quota_exempt(ApiKey.PRODUCE, False, True)


def _throttle_ms(body: Any) -> int:
    return int(body.throttle_time.total_seconds() * 1000)


def test_the_throttle_goes_into_the_answer_already_built() -> None:
    heartbeat = build_response(ApiKey.HEARTBEAT, 4, throttle_time_ms=0, error_code=0)
    assert _throttle_ms(answer_throttle_time(ApiKey.HEARTBEAT, 4, heartbeat, 750)) == 750
    no_field = build_response(ApiKey.SASL_HANDSHAKE, 1, error_code=0, mechanisms=["PLAIN"])
    assert not any(f.name == "throttle_time" for f in dataclasses.fields(no_field))
    assert answer_throttle_time(ApiKey.SASL_HANDSHAKE, 1, no_field, 750) is no_field
    assert answer_throttle_time(ApiKey.PRODUCE, 11, None, 750) is None
    for version in (8, 11):  # Produce is pre-encoded: throttle last (v8), before tags (v11)
        produce = build_response(ApiKey.PRODUCE, version, throttle_time_ms=20, responses=[{
            "name": "t", "partition_responses": [{
                "index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1,
                "log_start_offset": 0, "record_errors": [], "error_message": None}]}])
        encoded = Response([encode_body(produce)], (7,))
        patched = answer_throttle_time(ApiKey.PRODUCE, version, encoded, 750)
        assert isinstance(patched, Response) and patched.error_codes == (7,)
        body = decode_response_body(ApiKey.PRODUCE, version,
                                    b"".join(bytes(c) for c in patched.chunks
                                             if isinstance(c, bytes)), 0)
        assert _throttle_ms(body) == 750
        assert body.responses == produce.responses
