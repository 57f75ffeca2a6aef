"""The version table, the API key names and the error codes against kio and Kafka."""

from __future__ import annotations

import pytest
from kio.schema.index import api_key_map

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode, error_code_for, kafka_error_name
from strata.protocol.messages import request_type, response_type
from strata.protocol.registry import VersionRange

SUPPORTED_VERSIONS = served_versions()


# The version table, written here a second time on purpose, as the
# expectation the table is checked against.
EXPECTED = {
    "API_VERSIONS": (0, 4),
    "METADATA": (0, 13),
    "PRODUCE": (3, 13),
    "FETCH": (4, 18),
    "LIST_OFFSETS": (1, 11),
    "CREATE_TOPICS": (2, 7),
    "DELETE_TOPICS": (1, 6),
    "INIT_PRODUCER_ID": (0, 6),
    "ADD_PARTITIONS_TO_TXN": (0, 5),
    "ADD_OFFSETS_TO_TXN": (0, 4),
    "END_TXN": (0, 5),
    "DESCRIBE_TRANSACTIONS": (0, 0),
    "LIST_TRANSACTIONS": (0, 2),
    "FIND_COORDINATOR": (0, 6),
    "JOIN_GROUP": (0, 9),
    "SYNC_GROUP": (0, 5),
    "HEARTBEAT": (0, 4),
    "LEAVE_GROUP": (0, 5),
    "OFFSET_COMMIT": (2, 9),
    "OFFSET_FETCH": (1, 9),
    "DESCRIBE_GROUPS": (0, 6),
    "LIST_GROUPS": (0, 5),
    "CONSUMER_GROUP_HEARTBEAT": (0, 1),
    "CONSUMER_GROUP_DESCRIBE": (0, 1),
    "DESCRIBE_CONFIGS": (1, 4),
    "ALTER_CONFIGS": (0, 2),
    "INCREMENTAL_ALTER_CONFIGS": (0, 1),
    "CREATE_PARTITIONS": (0, 3),
    "DELETE_RECORDS": (0, 2),
    "DELETE_GROUPS": (0, 2),
    "OFFSET_DELETE": (0, 0),
    "OFFSET_FOR_LEADER_EPOCH": (2, 4),
    "DESCRIBE_CLUSTER": (0, 2),
    "ELECT_LEADERS": (0, 2),
    "ALTER_PARTITION_REASSIGNMENTS": (0, 1),
    "LIST_PARTITION_REASSIGNMENTS": (0, 0),
    "SASL_HANDSHAKE": (0, 1),
    "SASL_AUTHENTICATE": (0, 2),
    "DESCRIBE_USER_SCRAM_CREDENTIALS": (0, 0),
    "ALTER_USER_SCRAM_CREDENTIALS": (0, 0),
    "DESCRIBE_ACLS": (1, 3),
    "CREATE_ACLS": (1, 3),
    "DELETE_ACLS": (1, 3),
    "DESCRIBE_LOG_DIRS": (1, 5),
    "ALTER_REPLICA_LOG_DIRS": (1, 2),
    "DESCRIBE_PRODUCERS": (0, 0),
    "DESCRIBE_TOPIC_PARTITIONS": (0, 0),
    "DESCRIBE_CLIENT_QUOTAS": (0, 1),
    "ALTER_CLIENT_QUOTAS": (0, 1),
    "GET_TELEMETRY_SUBSCRIPTIONS": (0, 0),
    "PUSH_TELEMETRY": (0, 0),
    "WRITE_TXN_MARKERS": (1, 2),
    "TXN_OFFSET_COMMIT": (0, 5),
}


def test_table_matches_the_architecture() -> None:
    got = {key.name: (r.min_version, r.max_version) for key, r in SUPPORTED_VERSIONS.items()}
    assert got == EXPECTED


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        SUPPORTED_VERSIONS[ApiKey.FETCH] = VersionRange(0, 1)  # type: ignore[index]


def test_every_served_version_has_kio_classes() -> None:
    for key, served in SUPPORTED_VERSIONS.items():
        for version in served.versions():
            request = request_type(key, version)
            response = response_type(key, version)
            assert request.__api_key__ == response.__api_key__ == key
            assert request.__version__ == response.__version__ == version


# Every API Kafka has flexible versions of (KIP-482) is served up to one of them.
NOT_YET_FLEXIBLE: set[str] = set()


def test_apis_are_served_up_to_their_flexible_versions() -> None:
    behind = set()
    for key, served in SUPPORTED_VERSIONS.items():
        newest_flexible = request_type(key, served.max_version).__flexible__
        if not newest_flexible and any(
                _flexible(key, v) for v in range(served.max_version + 1, 64)):
            behind.add(key.name)
    assert behind == NOT_YET_FLEXIBLE


def _flexible(key: ApiKey, version: int) -> bool:
    try:
        return bool(request_type(key, version).__flexible__)
    except LookupError:
        return False


def test_api_keys_are_kafkas_names_for_every_key_kio_knows() -> None:
    assert {key.value: key.name.lower() for key in ApiKey} == dict(api_key_map)
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert ApiKey.API_VERSIONS == 18


def test_version_range() -> None:
    served = VersionRange(3, 8)
    assert 3 in served and 8 in served
    assert 2 not in served and 9 not in served and "4" not in served
    assert list(served.versions()) == [3, 4, 5, 6, 7, 8]
    assert str(served) == "3-8"
    with pytest.raises(ValueError):
        VersionRange(2, 1)
    with pytest.raises(ValueError):
        VersionRange(-1, 1)


def test_error_codes_are_complete_and_named_as_kafka_names_them() -> None:
    values = sorted(code.value for code in ErrorCode)
    assert values == list(range(-1, values[-1] + 1))  # no gaps from UNKNOWN_SERVER_ERROR up
    assert values[-1] >= 119
    assert ErrorCode.unsupported_version == 35
    assert kafka_error_name(35) == "UNSUPPORTED_VERSION"
    assert kafka_error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert kafka_error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert kafka_error_name(0) == "NONE"
    assert kafka_error_name(30000) == "UNKNOWN_ERROR_CODE_30000"
    assert error_code_for("KAFKA_STORAGE_ERROR") == 56
    assert error_code_for("FENCED_LEADER_EPOCH") == 74
    with pytest.raises(KeyError):
        error_code_for("NOT_A_KAFKA_ERROR")


def test_error_codes_agree_with_storage_errors() -> None:
    from strata.storage import errors as storage_errors

    for value in vars(storage_errors).values():
        if isinstance(value, type) and issubclass(value, storage_errors.StorageError):
            assert kafka_error_name(value.error_code) == value.error_name, value
