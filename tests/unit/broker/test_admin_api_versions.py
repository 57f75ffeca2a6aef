"""The admin APIs whose newer versions change only the encoding, through the wire path.

CreatePartitions v0-3, DescribeConfigs v1-4, AlterConfigs v0-2, IncrementalAlterConfigs v0-1,
DeleteRecords v0-2, Create/Delete/DescribeAcls v1-3 (no authorizer: SECURITY_DISABLED),
SaslHandshake v0-1 and SaslAuthenticate v0-2 (a PLAINTEXT listener: ILLEGAL_SASL_STATE),
ElectLeaders v0-2, AlterPartitionReassignments v0-1, ListPartitionReassignments v0,
Describe/AlterUserScramCredentials v0 and OffsetForLeaderEpoch v2-4: every version served is
sent by kio (with an unknown tagged field when flexible) and its answer read back by kio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import is_flexible

from .helpers import add_topics, broker_state
from .wire_round_trip import round_trip

NEWEST = {
    ApiKey.CREATE_PARTITIONS: 3, ApiKey.DESCRIBE_CONFIGS: 4, ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1, ApiKey.DELETE_RECORDS: 2, ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3, ApiKey.DESCRIBE_ACLS: 3, ApiKey.SASL_HANDSHAKE: 1,
    ApiKey.SASL_AUTHENTICATE: 2, ApiKey.ELECT_LEADERS: 2,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 1, ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0, ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
}
ADMIN_FLEXIBLE_VERSIONS = frozenset({
    ("API_VERSIONS", 4), *(("CREATE_TOPICS", v) for v in (5, 6, 7)),
    *(("DELETE_TOPICS", v) for v in (4, 5, 6)), ("DESCRIBE_CONFIGS", 4), ("ALTER_CONFIGS", 2),
    ("CREATE_PARTITIONS", 2), ("CREATE_PARTITIONS", 3), ("DELETE_RECORDS", 2),
    *(("INIT_PRODUCER_ID", v) for v in (2, 3, 4, 5, 6)), ("DESCRIBE_CLUSTER", 2),
    *((acls, v) for acls in ("CREATE_ACLS", "DELETE_ACLS", "DESCRIBE_ACLS") for v in (2, 3)),
    ("SASL_AUTHENTICATE", 2), ("ALTER_PARTITION_REASSIGNMENTS", 1),
    ("OFFSET_FOR_LEADER_EPOCH", 4),
})
"""The flexible versions the admin APIs gained (the protocol tests pin the older ones)."""
ACL = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
       "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
ACL_FILTER = {"resource_type_filter": 2, "resource_name_filter": "t", "pattern_type_filter": 3,
              "principal_filter": "User:alice", "host_filter": "*", "operation": 3,
              "permission_type": 3}
TOPIC = {"resource_type": 2, "resource_name": "t"}


def check_create_partitions(r: Any) -> None:
    assert [(x.name, x.error_code) for x in r.results] == [("t", 0)]


def check_describe_configs(r: Any) -> None:
    (result,) = r.results
    assert result.error_code == 0
    assert {c.name: c.value for c in result.configs}["retention.ms"] == "604800000"


def check_alter(r: Any) -> None:
    assert [(x.resource_name, x.error_code) for x in r.responses] == [("t", 0)]


def check_delete_records(r: Any) -> None:
    (topic,) = r.topics
    assert [(p.partition_index, p.error_code, p.low_watermark) for p in topic.partitions] == [
        (0, 0, 0)]


def check_security_disabled(results: str) -> Any:
    def check(r: Any) -> None:
        assert [x.error_code for x in getattr(r, results)] == [54]
    return check


def check_describe_acls(r: Any) -> None:
    assert (r.error_code, r.resources) == (54, ())


def check_sasl(r: Any) -> None:
    assert r.error_code == 34  # ILLEGAL_SASL_STATE: no SASL on this listener


def check_elect_leaders(r: Any) -> None:
    (topic,) = r.replica_election_results
    assert [p.partition_id for p in topic.partition_result] == [0]


def check_alter_reassignments(r: Any) -> None:
    (topic,) = r.responses
    # A single broker has nowhere to move a partition.
    assert [p.error_code for p in topic.partitions] == [39]  # INVALID_REPLICA_ASSIGNMENT
    assert getattr(r, "allow_replication_factor_change", True) is True


def check_list_reassignments(r: Any) -> None:
    assert r.error_code == 0


def check_scram(r: Any) -> None:
    assert r.error_code in (0, 35)


def check_alter_scram(r: Any) -> None:
    assert r.results == ()


def check_offset_for_leader_epoch(r: Any) -> None:
    (topic,) = r.topics
    assert [(p.partition, p.error_code) for p in topic.partitions] == [(0, 0)]


CASES: list[tuple[ApiKey, dict[str, Any], Any]] = [
    (ApiKey.CREATE_PARTITIONS, {"timeout_ms": 1000, "validate_only": False, "topics": [
        {"name": "t", "count": 3, "assignments": None}]}, check_create_partitions),
    (ApiKey.DESCRIBE_CONFIGS, {"resources": [{**TOPIC, "configuration_keys": None}],
                               "include_synonyms": True, "include_documentation": True},
     check_describe_configs),
    (ApiKey.ALTER_CONFIGS, {"validate_only": False, "resources": [
        {**TOPIC, "configs": [{"name": "retention.ms", "value": "1000"}]}]}, check_alter),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, {"validate_only": False, "resources": [
        {**TOPIC, "configs": [{"name": "retention.ms", "config_operation": 0,
                               "value": "1000"}]}]}, check_alter),
    (ApiKey.DELETE_RECORDS, {"timeout_ms": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": -1}]}]},
     check_delete_records),
    (ApiKey.CREATE_ACLS, {"creations": [ACL]}, check_security_disabled("results")),
    (ApiKey.DELETE_ACLS, {"filters": [ACL_FILTER]}, check_security_disabled("filter_results")),
    (ApiKey.DESCRIBE_ACLS, ACL_FILTER, check_describe_acls),
    (ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, check_sasl),
    (ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\x00alice\x00secret"}, check_sasl),
    (ApiKey.ELECT_LEADERS, {"election_type": 0, "timeout_ms": 1000, "topic_partitions": [
        {"topic": "t", "partitions": [0]}]}, check_elect_leaders),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
        "timeout_ms": 1000, "allow_replication_factor_change": True,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
     check_alter_reassignments),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": None},
     check_list_reassignments),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None}, check_scram),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": []},
     check_alter_scram),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]},
     check_offset_for_leader_epoch),
]


def test_each_api_is_served_up_to_the_newest_version_kio_knows() -> None:
    served = served_versions()
    assert {key: served[key].max_version for key in NEWEST} == NEWEST
    assert {key for key, _, _ in CASES} == set(NEWEST)


def test_the_gained_flexible_versions_are_the_flexible_served_ones() -> None:
    admin = {key.name for key in (*NEWEST, ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS,
                                  ApiKey.DELETE_TOPICS, ApiKey.INIT_PRODUCER_ID,
                                  ApiKey.DESCRIBE_CLUSTER)}
    older = {("API_VERSIONS", 3), ("DESCRIBE_CLUSTER", 0), ("DESCRIBE_CLUSTER", 1),
             ("ALTER_PARTITION_REASSIGNMENTS", 0), ("INCREMENTAL_ALTER_CONFIGS", 1),
             ("ELECT_LEADERS", 2), ("LIST_PARTITION_REASSIGNMENTS", 0),
             ("DESCRIBE_USER_SCRAM_CREDENTIALS", 0), ("ALTER_USER_SCRAM_CREDENTIALS", 0)}
    flexible = {(key.name, v) for key, served in served_versions().items()
                if key.name in admin for v in served.versions() if is_flexible(key, v)}
    assert flexible - older == ADMIN_FLEXIBLE_VERSIONS


@pytest.mark.parametrize(("api_key", "fields", "check"), CASES,
                         ids=[key.name for key, _, _ in CASES])
async def test_every_served_version(tmp_path: Path, api_key: ApiKey, fields: dict[str, Any],
                                    check: Any) -> None:
    for version in served_versions()[api_key].versions():
        state = broker_state(tmp_path / f"v{version}")
        await add_topics(state, ("t", 1))
        response = await round_trip(state, api_key, version, fields,
                                    unknown_tag=is_flexible(api_key, version))
        check(response)
