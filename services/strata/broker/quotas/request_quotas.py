"""Where client quotas meet requests: what a request is charged, and how its throttle is served.

Owns the per-request rules of Kafka's byte-rate quotas (KIP-13, KIP-219):

- who is charged: the principal's name (``User:alice`` -> ``alice``; unauthenticated clients
  are ``ANONYMOUS``) and the request header's client id, resolved to a quota and its shared
  sensor by ``ClientQuotas.resolve``;
- what: a Produce request its size in bytes, before it is handled (its response carries the
  throttle time); a Fetch response its size in bytes once built;
- how the throttle is served (``ThrottlePlan``): from the versions at which Kafka's clients
  throttle themselves (Produce v6, Fetch v8; KIP-219) the response goes out at once carrying
  ``throttle_time_ms`` and the connection then reads nothing for that long (Kafka mutes the
  channel); at older versions the response itself is held back for the throttle time, as
  Kafka did before KIP-219.

Pure: quotas and time come from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.protocol.api_keys import ApiKey

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


def is_consumer_fetch(request: object) -> bool:
    """Whether a Fetch request comes from a consumer (followers are not client-quota'd):
    ``replica_id`` -1 (v0-14) or ``replica_state.replica_id`` -1 (v15+)."""
    state = getattr(request, "replica_state", None)
    replica_id = getattr(state if state is not None else request, "replica_id", -1)
    return int(replica_id) < 0
