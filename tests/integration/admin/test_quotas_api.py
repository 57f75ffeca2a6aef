"""The admin API's client-quota routes against a real broker: set, list, filter, remove, and
the broker's refusals as problem+json titled with Kafka's error name."""

from __future__ import annotations

import httpx
import pytest

from .test_topics_api import problem

pytestmark = pytest.mark.integration

ALICE = [{"type": "user", "name": "qa-alice"}]


def test_set_list_and_remove(api: httpx.Client) -> None:
    answer = api.put("/v1/quotas", json={"entity": ALICE, "set": {
        "producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"entity": ALICE, "quotas": {
        "producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0}}
    default_client = [{"type": "user", "name": "qa-alice"}, {"type": "client-id", "name": None}]
    assert api.put("/v1/quotas", json={"entity": default_client,
                                       "set": {"request_percentage": 25}}).status_code == 200
    strict = api.get("/v1/quotas", params={"user": "qa-alice", "strict": "true"}).json()
    assert strict == [{"entity": ALICE, "quotas": {"producer_byte_rate": 1048576.0,
                                                   "consumer_byte_rate": 2097152.0}}]
    loose = api.get("/v1/quotas", params={"user": "qa-alice"}).json()
    assert len(loose) == 2
    removed = api.put("/v1/quotas", json={"entity": ALICE, "remove": ["consumer_byte_rate"]})
    assert removed.json()["quotas"] == {"producer_byte_rate": 1048576.0}


def test_refusals(api: httpx.Client) -> None:
    fractional = api.put("/v1/quotas", json={"entity": ALICE,
                                             "set": {"producer_byte_rate": 1.5}})
    assert problem(fractional, 400, "INVALID_REQUEST")["detail"] == (
        "Configuration producer_byte_rate must be a Long value")
    unknown = api.put("/v1/quotas", json={"entity": ALICE, "set": {"no_such_rate": 1}})
    assert problem(unknown, 400, "INVALID_REQUEST")["detail"] == (
        "Invalid configuration key no_such_rate")
    assert api.put("/v1/quotas", json={"entity": ALICE}).status_code == 422
    both = api.get("/v1/quotas", params={"user": "x", "user_default": "true"})
    assert problem(both, 400, "INVALID_REQUEST")
