"""The broker's handler registry against the version table, and ApiVersions derived from it."""

from __future__ import annotations

from strata.broker.handlers import build_registry, served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import api_versions_response

SUPPORTED_VERSIONS = served_versions()



def test_registered_apis_match_the_version_table() -> None:
    registry = build_registry()
    registered = {r.api_key: r.versions for r in registry}
    table = {key: SUPPORTED_VERSIONS[key] for key in registered if key in SUPPORTED_VERSIONS}
    assert registry.differences(table) == []
    # Every registered API is in the table: nothing is advertised that the table lacks.
    assert set(registered) <= set(SUPPORTED_VERSIONS)


def test_the_control_plane_and_data_path_are_registered() -> None:
    registry = build_registry()
    for key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.CREATE_TOPICS,
                ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CONFIGS,
                ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.PRODUCE,
                ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.DELETE_RECORDS,
                ApiKey.INIT_PRODUCER_ID):
        assert key in registry, key.name


def test_metadata_max_keeps_kafka_python_on_modern_messages() -> None:
    # kafka-python infers the broker version from Metadata's max.
    assert build_registry().version_ranges()[ApiKey.METADATA].max_version >= 4


def test_api_versions_lists_exactly_the_registry() -> None:
    ranges = build_registry().version_ranges()
    body = api_versions_response(3, ranges)
    listed = {e.api_key: (e.min_version, e.max_version) for e in body.api_keys}
    assert listed == {k: (v.min_version, v.max_version) for k, v in ranges.items()}
