"""DescribeClientQuotas and AlterClientQuotas on a single broker, over the wire at both
versions: what is set is described, kept in ``client-quotas.json`` across a restart, and bad
alterations are refused per entry with Kafka's errors while the others are applied."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from strata.client.broker_client import BrokerClient
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

from ..broker_process import BrokerProcess

SPECIFIED = 2


async def _ask(broker: BrokerProcess, api_key: ApiKey, version: int, **fields: Any) -> Any:
    client = BrokerClient("127.0.0.1", broker.port, client_id="quota-test",
                          request_timeout_s=10)
    try:
        return await client.request(api_key, version, fields)
    finally:
        await client.close()


def _alter(broker: BrokerProcess, version: int, entries: list[dict[str, Any]],
           validate_only: bool = False) -> list[tuple[int, str | None]]:
    response = asyncio.run(_ask(broker, ApiKey.ALTER_CLIENT_QUOTAS, version, entries=entries,
                                validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in response.entries]


def _describe(broker: BrokerProcess, version: int, components: list[dict[str, Any]],
              strict: bool = False) -> Any:
    return asyncio.run(_ask(broker, ApiKey.DESCRIBE_CLIENT_QUOTAS, version,
                            components=components, strict=strict))


def _entry(entity: dict[str, str | None], **ops: float | None) -> dict[str, Any]:
    return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
            "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None}
                    for k, v in ops.items()]}


def _all(broker: BrokerProcess, version: int = 1) -> dict[tuple[tuple[str, str | None], ...],
                                                          dict[str, float]]:
    response = _describe(broker, version, [])
    assert response.error_code == ErrorCode.none
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


@pytest.mark.parametrize("version", [0, 1])
def test_set_describe_remove_at_each_version(make_broker: Any, version: int) -> None:
    broker = make_broker()
    assert _alter(broker, version, [
        _entry({"user": "alice"}, producer_byte_rate=1024.0, consumer_byte_rate=2048.0),
        _entry({"user": "alice", "client-id": None}, request_percentage=50.5),
    ]) == [(0, None), (0, None)]
    assert _all(broker, version) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        (("client-id", None), ("user", "alice")): {"request_percentage": 50.5},
    }
    strict = _describe(broker, version, [
        {"entity_type": "user", "match_type": SPECIFIED, "match": None}], strict=True)
    assert [len(e.entity) for e in strict.entries] == [1]
    assert _alter(broker, version, [_entry({"user": "alice"}, producer_byte_rate=None,
                                           consumer_byte_rate=None)]) == [(0, None)]
    assert list(_all(broker, version)) == [(("client-id", None), ("user", "alice"))]


def test_refusals_are_per_entry_and_validate_only_stores_nothing(make_broker: Any) -> None:
    broker = make_broker()
    results = _alter(broker, 1, [
        _entry({"user": "bob"}, producer_byte_rate=1.5),
        _entry({"user": "carol"}, no_such_rate=1.0),
        _entry({"group": "g"}, producer_byte_rate=1.0),
        _entry({"user": "dave"}, producer_byte_rate=100.0),
    ])
    assert [code for code, _ in results] == [ErrorCode.invalid_request] * 3 + [ErrorCode.none]
    assert results[0][1] == "Configuration producer_byte_rate must be a Long value"
    assert _alter(broker, 1, [_entry({"user": "erin"}, producer_byte_rate=5.0)],
                  validate_only=True) == [(0, None)]
    assert list(_all(broker)) == [(("user", "dave"),)]
    bad_filter = _describe(broker, 1, [{"entity_type": "group", "match_type": SPECIFIED,
                                        "match": None}])
    assert (bad_filter.error_code, bad_filter.entries) == (ErrorCode.unsupported_version, None)


def test_quotas_survive_a_restart(make_broker: Any) -> None:
    broker = make_broker()
    _alter(broker, 1, [_entry({"client-id": "app"}, producer_byte_rate=4096.0)])
    broker.restart()
    assert _all(broker) == {(("client-id", "app"),): {"producer_byte_rate": 4096.0}}
    assert (broker.data_dir / "client-quotas.json").exists()
