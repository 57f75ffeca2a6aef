"""The broker's Kafka API handlers: one module per API, and the list that routes to them.

``build_registry()`` is the routing list (Tansu's pattern): (api key, min version, max version,
handler) per served API, and the only place Strata's served version ranges are written.
ApiVersions advertises exactly what is registered here (``served_versions()``); nothing else
restates a range. Invariants (unit tests in tests/unit/broker/test_handler_registry.py):

- every (api key, version) registered has a request and a response class in kio (``register``
  refuses it otherwise);
- every version is non-flexible except where Kafka has no other: ApiVersions v3 (flexible body,
  but its response still uses response header v0, KIP-511), IncrementalAlterConfigs v1 (Kafka's
  first flexible version of that API), ListGroups v3-4 (group states, KIP-518), ElectLeaders v2,
  DescribeCluster, Alter/ListPartitionReassignments and Describe/AlterUserScramCredentials
  (flexible-only). Other APIs are raised to flexible versions once tagged fields are handled end
  to end; the admin APIs are (ApiVersions, Create/DeleteTopics, CreatePartitions, Describe/
  AlterConfigs, DeleteRecords, InitProducerId, the ACL and SASL APIs, OffsetForLeaderEpoch:
  each up to the newest version kio has, InitProducerId to v5, below KIP-939's transactions).

Not registered yet, on purpose: the transaction APIs (not built; an InitProducerId with a
transactional id gets a clear error instead). The ACL APIs start at v1 (kio, like
Kafka 4, has no v0).

A handler is ``async def handle(ctx: RequestContext, request) -> response`` (see
``strata.broker.network.connection``); per-resource refusals inside a handler are
``ApiError`` s, turned into that resource's ``error_code`` / ``error_message``.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.registry import HandlerRegistry, VersionRange


class ApiError(Exception):
    """A per-resource refusal (a topic, a config resource): Kafka's error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def build_registry() -> HandlerRegistry[Handler]:
    """Every served API with its version range (the source of the advertised versions)."""
    # Imported here: the handler modules import ``ApiError`` from this package.
    from strata.broker.handlers import (
        alter_configs,
        alter_partition_reassignments,
        alter_user_scram_credentials,
        api_versions,
        create_acls,
        create_partitions,
        create_topics,
        delete_acls,
        delete_groups,
        delete_records,
        delete_topics,
        describe_acls,
        describe_cluster,
        describe_configs,
        describe_groups,
        describe_user_scram_credentials,
        elect_leaders,
        fetch,
        find_coordinator,
        heartbeat,
        incremental_alter_configs,
        init_producer_id,
        join_group,
        leave_group,
        list_groups,
        list_offsets,
        list_partition_reassignments,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        offset_for_leader_epoch,
        produce,
        sasl_authenticate,
        sasl_handshake,
        sync_group,
    )
    routes: list[tuple[ApiKey, int, int, Handler]] = [
        (ApiKey.PRODUCE, 3, 8, produce.handle),
        (ApiKey.FETCH, 4, 11, fetch.handle),
        (ApiKey.LIST_OFFSETS, 1, 5, list_offsets.handle),
        (ApiKey.METADATA, 0, 8, metadata.handle),
        (ApiKey.API_VERSIONS, 0, 4, api_versions.handle),
        (ApiKey.CREATE_TOPICS, 2, 7, create_topics.handle),
        (ApiKey.DELETE_TOPICS, 1, 6, delete_topics.handle),
        (ApiKey.DELETE_RECORDS, 0, 2, delete_records.handle),
        (ApiKey.INIT_PRODUCER_ID, 0, 5, init_producer_id.handle),
        (ApiKey.DESCRIBE_CONFIGS, 1, 4, describe_configs.handle),
        (ApiKey.ALTER_CONFIGS, 0, 2, alter_configs.handle),
        (ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions.handle),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs.handle),
        (ApiKey.FIND_COORDINATOR, 0, 2, find_coordinator.handle),
        (ApiKey.JOIN_GROUP, 0, 5, join_group.handle),
        (ApiKey.SYNC_GROUP, 0, 3, sync_group.handle),
        (ApiKey.HEARTBEAT, 0, 3, heartbeat.handle),
        (ApiKey.LEAVE_GROUP, 0, 3, leave_group.handle),
        (ApiKey.OFFSET_COMMIT, 2, 7, offset_commit.handle),
        (ApiKey.OFFSET_FETCH, 1, 5, offset_fetch.handle),
        (ApiKey.DESCRIBE_GROUPS, 0, 4, describe_groups.handle),
        (ApiKey.LIST_GROUPS, 0, 4, list_groups.handle),
        (ApiKey.DELETE_GROUPS, 0, 1, delete_groups.handle),
        (ApiKey.OFFSET_DELETE, 0, 0, offset_delete.handle),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, offset_for_leader_epoch.handle),
        (ApiKey.DESCRIBE_CLUSTER, 0, 2, describe_cluster.handle),
        (ApiKey.ELECT_LEADERS, 0, 2, elect_leaders.handle),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter_partition_reassignments.handle),
        (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_partition_reassignments.handle),
        (ApiKey.SASL_HANDSHAKE, 0, 1, sasl_handshake.handle),
        (ApiKey.SASL_AUTHENTICATE, 0, 2, sasl_authenticate.handle),
        (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe_user_scram_credentials.handle),
        (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter_user_scram_credentials.handle),
        (ApiKey.DESCRIBE_ACLS, 1, 3, describe_acls.handle),
        (ApiKey.CREATE_ACLS, 1, 3, create_acls.handle),
        (ApiKey.DELETE_ACLS, 1, 3, delete_acls.handle),
    ]
    registry: HandlerRegistry[Handler] = HandlerRegistry()
    for api_key, min_version, max_version, handler in routes:
        registry.register(api_key, min_version, max_version, handler)
    return registry


def served_versions() -> Mapping[ApiKey, VersionRange]:
    """API key -> the inclusive version range Strata serves: what ApiVersions advertises."""
    return build_registry().version_ranges()


from strata.broker.network.connection import Handler  # noqa: E402 - after ApiError (import cycle)

__all__ = ["ApiError", "Handler", "build_registry", "served_versions"]
