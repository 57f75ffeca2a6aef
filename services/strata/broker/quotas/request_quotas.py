"""Where client quotas meet requests: what a request is charged, and how its throttle is served.

Owns the per-request rules of Kafka's byte-rate quotas (KIP-13, KIP-219):

- who is charged: the principal's name (``User:alice`` -> ``alice``; unauthenticated clients
  are ``ANONYMOUS``) and the request header's client id, resolved to a quota and its shared
  sensor by ``ClientQuotas.resolve``;
- what: a Produce request its size in bytes, before it is handled (the connection charges it;
  its response carries the throttle time); a consumer's Fetch its records' bytes once read
  (the fetch handler charges it, after capping the read at one quota window);
- how the throttle is served (``ThrottlePlan``): from the versions at which Kafka's clients
  throttle themselves (Produce v6, Fetch v8; KIP-219) the response goes out at once carrying
  ``throttle_time_ms`` and the connection then reads nothing for that long (Kafka mutes the
  channel); at older versions the response itself is held back for the throttle time, as
  Kafka did before KIP-219.

- the request quota (``request_percentage``, KIP-124): every request is charged its thread
  time (``request_time.RequestTime``) except those Kafka exempts
  (``request_quota_exempt``): the inter-broker APIs (Kafka's ``ApiKeys.clusterAction``, answered
  with ``sendResponseExemptThrottle``), a follower's Fetch (the fetch handler says so), and
  what Kafka's SASL authenticator answers before any request reaches ``KafkaApis`` — on a SASL
  listener, SaslHandshake, SaslAuthenticate (re-authentication too) and anything before the
  login completes. Produce with acks=0 has no answer and is not charged (Kafka neither).
  ``answer_throttle_time`` puts the larger of the byte-rate and request throttles into a
  response already built (Kafka's ``maybeSetThrottleTimeMs``);
- partition mutations (``MutationQuota``): CreateTopics, CreatePartitions and DeleteTopics
  admit each topic's partitions against ``controller_mutation_rate``, refusing them
  THROTTLING_QUOTA_EXCEEDED from the versions that know that error, and answer the bucket's
  throttle time.

Pure: quotas and time come from the caller.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import Any, Final

from strata.broker.network.request_context import RequestContext, Response
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.request_time import RequestTime
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import decode_response_body, encode_body

CLIENT_SIDE_THROTTLE_FROM: Final = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}
"""API key -> first version whose clients throttle themselves on ``throttle_time_ms``."""


def quota_user(principal: str) -> str:
    """The user name quotas are configured for: the principal's name without its type."""
    return principal.partition(":")[2] or principal


@dataclass(frozen=True, slots=True)
class ThrottlePlan:
    """How long to hold a client back, and whether before its response (old versions) or
    after it (the client knows, from ``throttle_time_ms``)."""

    throttle_ms: int
    delay_response: bool

    @property
    def delay_s(self) -> float:
        return self.throttle_ms / 1000.0


def throttle_plan(api_key: int, api_version: int, throttle_ms: int) -> ThrottlePlan | None:
    """The plan for ``throttle_ms`` of an API at a version; None when there is none."""
    if throttle_ms <= 0:
        return None
    first = CLIENT_SIDE_THROTTLE_FROM.get(ApiKey(api_key), 0)
    return ThrottlePlan(throttle_ms, delay_response=api_version < first)


INTER_BROKER_APIS: Final = frozenset({
    ApiKey.WRITE_TXN_MARKERS, ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH,
    ApiKey.ALTER_PARTITION, ApiKey.ENVELOPE, ApiKey.FETCH_SNAPSHOT, ApiKey.BROKER_REGISTRATION,
    ApiKey.BROKER_HEARTBEAT, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.CONTROLLER_REGISTRATION,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY})
"""Kafka's cluster-action APIs a broker answers exempt from the request quota (DescribeQuorum
and UpdateFeatures, cluster actions too, reach a broker from admin tools and are throttled)."""

SASL_APIS: Final = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def request_quota_exempt(api_key: int, sasl_listener: bool, authenticated: bool) -> bool:
    """Whether a request is exempt from ``request_percentage`` (a follower's Fetch is
    exempted by the fetch handler, which alone knows the replica id)."""
    if api_key in INTER_BROKER_APIS:
        return True
    return sasl_listener and (api_key in SASL_APIS or not authenticated)


def start_request_time(quotas: BrokerQuotas, ctx: RequestContext, sasl_listener: bool,
                       authenticated: bool, received_ns: int) -> RequestTime | None:
    """The thread-time account of a request just decoded (its decoding counted, from
    ``received_ns`` on ``perf_counter_ns``); None while no request quota is set."""
    if not quotas.request.enabled:
        return None
    request_time = RequestTime(
        quotas.request, quota_user(ctx.principal), ctx.header.client_id or "",
        exempt=request_quota_exempt(ctx.header.api_key, sasl_listener, authenticated))
    request_time.add(request_time.clock() - received_ns)
    return request_time


def charge_request_time(request_time: RequestTime, ctx: RequestContext, result: Any) -> Any:
    """Charge a request answered with ``result`` its thread time (once: the fetch handler may
    have charged it already); ``result`` carrying the larger of its own throttle and the
    request quota's (``ctx.throttle_time_ms`` too)."""
    throttle = request_time.charge(ctx.state.clock.milliseconds())
    if throttle <= ctx.throttle_time_ms:
        return result
    ctx.throttle_time_ms = throttle
    return answer_throttle_time(ctx.header.api_key, ctx.header.api_version, result, throttle)


def answer_throttle_time(api_key: int, api_version: int, result: Any, throttle_ms: int) -> Any:
    """``result`` (a kio response body, or a ``Response`` of bytes) carrying ``throttle_ms`` in
    its ``throttle_time_ms``; unchanged when it has no such field (or holds file slices)."""
    if isinstance(result, Response):
        parts = [chunk for chunk in result.chunks if isinstance(chunk, bytes)]
        if len(parts) != len(result.chunks):
            return result
        body = decode_response_body(api_key, api_version, b"".join(parts), 0)
        patched = answer_throttle_time(api_key, api_version, body, throttle_ms)
        if patched is body:
            return result
        return Response([encode_body(patched)], result.error_codes)
    if result is None or not dataclasses.is_dataclass(result) or isinstance(result, type) \
            or not any(f.name == "throttle_time" for f in dataclasses.fields(result)):
        return result
    return dataclasses.replace(result, throttle_time=datetime.timedelta(
        milliseconds=throttle_ms))


def charge_produce(quotas: BrokerQuotas | None, principal: str, client_id: str | None,
                   request_bytes: int, now_ms: int) -> int:
    """Record a Produce request against ``producer_byte_rate``; its throttle time."""
    if quotas is None or not quotas.produce.enabled:
        return 0
    return quotas.produce.record_and_get_throttle_time_ms(
        quota_user(principal), client_id or "", request_bytes, now_ms)


def charge_fetch(quotas: BrokerQuotas | None, principal: str, client_id: str | None,
                 response_bytes: int, now_ms: int) -> int:
    """Record a Fetch response against ``consumer_byte_rate``; its throttle time."""
    if quotas is None or not quotas.fetch.enabled:
        return 0
    return quotas.fetch.record_and_get_throttle_time_ms(
        quota_user(principal), client_id or "", response_bytes, now_ms)


STRICT_MUTATION_FROM: Final = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3,
                               ApiKey.DELETE_TOPICS: 5}
"""API key -> first version refused THROTTLING_QUOTA_EXCEEDED (older ones are only throttled)."""


class MutationQuota:
    """One request's view of its ``controller_mutation_rate`` quota (KIP-599)."""

    def __init__(self, quotas: BrokerQuotas | None, principal: str, client_id: str | None,
                 api_key: int, api_version: int, now_ms: int) -> None:
        self._manager = quotas.mutation if quotas is not None else None
        self._user = quota_user(principal)
        self._client_id = client_id or ""
        self._strict = api_version >= STRICT_MUTATION_FROM.get(ApiKey(api_key), 0)
        self._now_ms = now_ms

    def admit(self, partitions: int) -> bool:
        """Record ``partitions`` mutations; False: refuse them (THROTTLING_QUOTA_EXCEEDED)."""
        return self._manager is None or self._manager.admit(
            self._user, self._client_id, partitions, self._now_ms, self._strict)

    def throttle_time_ms(self) -> int:
        if self._manager is None:
            return 0
        return self._manager.throttle_time_ms(self._user, self._client_id, self._now_ms)
