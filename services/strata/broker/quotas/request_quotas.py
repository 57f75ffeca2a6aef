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

- partition mutations (``MutationQuota``): CreateTopics, CreatePartitions and DeleteTopics
  admit each topic's partitions against ``controller_mutation_rate``, refusing them
  THROTTLING_QUOTA_EXCEEDED from the versions that know that error, and answer the bucket's
  throttle time.

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
