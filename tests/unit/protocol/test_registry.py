"""HandlerRegistry: registration rules, lookup, derived ranges, checks against the table."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.registry import HandlerRegistry, Registration, VersionRange

SUPPORTED_VERSIONS = served_versions()


Handler = Callable[[object], object]


def noop(request: object) -> object:
    return request


def full_registry() -> HandlerRegistry[Handler]:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    for key, served in SUPPORTED_VERSIONS.items():
        registry.register(key, served.min_version, served.max_version, noop)
    return registry


def test_registering_the_table_matches_the_table() -> None:
    registry = full_registry()
    assert registry.differences(SUPPORTED_VERSIONS) == []
    assert dict(registry.version_ranges()) == dict(SUPPORTED_VERSIONS)
    assert len(registry) == len(SUPPORTED_VERSIONS)


def test_version_ranges_are_sorted_read_only_and_list_each_key_once() -> None:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    registry.register(ApiKey.METADATA, 0, 8, noop)
    registry.register(ApiKey.PRODUCE, 3, 8, noop)
    registry.register(ApiKey.API_VERSIONS, 0, 3, noop)
    ranges = registry.version_ranges()
    assert list(ranges) == [ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.API_VERSIONS]
    with pytest.raises(TypeError):
        ranges[ApiKey.FETCH] = VersionRange(4, 11)  # type: ignore[index]
    assert [r.api_key for r in registry] == list(ranges)
    assert all(isinstance(r, Registration) for r in registry)


def test_lookup_by_key_and_version() -> None:
    registry: HandlerRegistry[str] = HandlerRegistry()
    registry.register(ApiKey.PRODUCE, 3, 8, "produce")
    assert registry.lookup(0, 3) == "produce"
    assert registry.lookup(ApiKey.PRODUCE, 8) == "produce"
    assert registry.lookup(ApiKey.PRODUCE, 2) is None
    assert registry.lookup(ApiKey.PRODUCE, 9) is None
    assert registry.lookup(ApiKey.FETCH, 4) is None
    assert registry.lookup(4242, 0) is None
    assert ApiKey.PRODUCE in registry and ApiKey.FETCH not in registry


def test_decorator_registers_and_returns_the_handler() -> None:
    registry: HandlerRegistry[Handler] = HandlerRegistry()

    @registry.handles(ApiKey.HEARTBEAT, 0, 3)
    def heartbeat(request: object) -> object:
        return request

    assert registry.lookup(ApiKey.HEARTBEAT, 2) is heartbeat


def test_a_key_is_registered_once() -> None:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    registry.register(ApiKey.FETCH, 4, 11, noop)
    with pytest.raises(ValueError, match="FETCH is already registered \\(4-11\\)"):
        registry.register(ApiKey.FETCH, 4, 11, noop)


@pytest.mark.parametrize(
    ("api_key", "low", "high", "match"),
    [
        (4242, 0, 1, "unknown api key 4242"),
        (ApiKey.FETCH, 5, 4, "invalid version range"),
        (ApiKey.FETCH, -1, 4, "invalid version range"),
        (ApiKey.METADATA, 0, 999, "METADATA v"),
    ],
)
def test_bad_registrations(api_key: int, low: int, high: int, match: str) -> None:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    with pytest.raises(ValueError, match=match):
        registry.register(api_key, low, high, noop)
    assert len(registry) == 0


def test_differences_name_every_mismatch() -> None:
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    registry.register(ApiKey.PRODUCE, 3, 7, noop)
    registry.register(ApiKey.DESCRIBE_ACLS, 1, 1, noop)
    expected = {ApiKey.PRODUCE: VersionRange(3, 8), ApiKey.FETCH: VersionRange(4, 11)}
    assert registry.differences(expected) == [
        "PRODUCE: handler serves 3-7, the table says 3-8",
        "FETCH: 4-11 in the table but no handler is registered",
        "DESCRIBE_ACLS: handler registered for 1-1, not in the table",
    ]
