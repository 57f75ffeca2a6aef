"""The version table, the API key names and the error codes against kio and Kafka."""

from __future__ import annotations

import pytest
from kio.schema.index import api_key_map

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode, error_code_for, kafka_error_name
from strata.protocol.messages import request_type, response_type
from strata.protocol.registry import VersionRange

from ..broker.test_admin_api_versions import ADMIN_FLEXIBLE_VERSIONS

SUPPORTED_VERSIONS = served_versions()


# The version table, written here a second time on purpose, as the
# expectation the table is checked against.
EXPECTED = {
    "API_VERSIONS": (0, 4),
    "METADATA": (0, 8),
    "PRODUCE": (3, 8),
    "FETCH": (4, 11),
    "LIST_OFFSETS": (1, 5),
    "CREATE_TOPICS": (2, 7),
    "DELETE_TOPICS": (1, 6),
    "INIT_PRODUCER_ID": (0, 5),
    "FIND_COORDINATOR": (0, 2),
    "JOIN_GROUP": (0, 5),
    "SYNC_GROUP": (0, 3),
    "HEARTBEAT": (0, 3),
    "LEAVE_GROUP": (0, 3),
    "OFFSET_COMMIT": (2, 7),
    "OFFSET_FETCH": (1, 5),
    "DESCRIBE_GROUPS": (0, 4),
    "LIST_GROUPS": (0, 4),
    "DESCRIBE_CONFIGS": (1, 4),
    "ALTER_CONFIGS": (0, 2),
    "INCREMENTAL_ALTER_CONFIGS": (0, 1),
    "CREATE_PARTITIONS": (0, 3),
    "DELETE_RECORDS": (0, 2),
    "DELETE_GROUPS": (0, 1),
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
}


def test_table_matches_the_architecture() -> None:
    got = {key.name: (r.min_version, r.max_version) for key, r in SUPPORTED_VERSIONS.items()}
    assert got == EXPECTED


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        SUPPORTED_VERSIONS[ApiKey.FETCH] = VersionRange(0, 1)  # type: ignore[index]


def test_every_served_version_has_kio_classes_and_few_are_flexible() -> None:
    flexible = []
    for key, served in SUPPORTED_VERSIONS.items():
        for version in served.versions():
            request = request_type(key, version)
            response = response_type(key, version)
            assert request.__api_key__ == response.__api_key__ == key
            assert request.__version__ == response.__version__ == version
            if request.__flexible__:
                flexible.append((key.name, version))
    # The admin APIs' newer flexible versions are pinned with them (test_admin_api_versions).
    flexible = [f for f in flexible if f not in ADMIN_FLEXIBLE_VERSIONS]
    # ApiVersions v3 and IncrementalAlterConfigs v1 are flexible (KIP-482 "flexibleVersions":
    # "3+" and "1+"), ListGroups v3-4 (for the group states of KIP-518) and DescribeCluster
    # (only flexible versions exist), ElectLeaders v2 and Alter/ListPartitionReassignments (only
    # flexible versions exist), Describe/AlterUserScramCredentials (only flexible versions);
    # no other served version is.
    assert sorted(flexible) == [("ALTER_PARTITION_REASSIGNMENTS", 0),
                                ("ALTER_USER_SCRAM_CREDENTIALS", 0), ("API_VERSIONS", 3),
                                ("DESCRIBE_CLUSTER", 0), ("DESCRIBE_CLUSTER", 1),
                                ("DESCRIBE_USER_SCRAM_CREDENTIALS", 0),
                                ("ELECT_LEADERS", 2), ("INCREMENTAL_ALTER_CONFIGS", 1),
                                ("LIST_GROUPS", 3), ("LIST_GROUPS", 4),
                                ("LIST_PARTITION_REASSIGNMENTS", 0)]


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
