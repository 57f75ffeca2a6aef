"""The broker's Kafka API handlers: one module per API, and the list that routes to them.

``build_registry()`` is the routing list (Tansu's pattern): (api key, min version, max version,
handler) per served API, and the only place Strata's served version ranges are written.
ApiVersions advertises exactly what is registered here (``served_versions()``); nothing else
restates a range. Invariants (unit tests in tests/unit/broker/test_handler_registry.py):

- every (api key, version) registered has a request and a response class in kio (``register``
  refuses it otherwise);
- every version is non-flexible except where Kafka has no other: ApiVersions v3 (flexible body,
  but its response still uses response header v0, KIP-511), IncrementalAlterConfigs v1 (Kafka's
  first flexible version of that API), ElectLeaders v2,
  DescribeCluster, Alter/ListPartitionReassignments, Describe/AlterUserScramCredentials,
  GetTelemetrySubscriptions/PushTelemetry and WriteTxnMarkers (flexible-only), the classic
  group and offset APIs
  (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  TxnOffsetCommit,
  DescribeGroups, ListGroups, DeleteGroups), the consumer group APIs of KIP-848
  (ConsumerGroupHeartbeat, ConsumerGroupDescribe: flexible-only),
  Produce v9-13, Fetch v12-18, Metadata v9-13, ListOffsets v6-11, and the admin APIs
  (ApiVersions, Create/DeleteTopics, CreatePartitions, Describe/AlterConfigs, DeleteRecords,
  InitProducerId, the ACL and SASL APIs, OffsetForLeaderEpoch), and the transaction
  coordinator's (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  Describe/ListTransactions): each up to the newest version kio has.

Removed but advertised: Kafka 4 removed Produce v0-v2 (KIP-896) yet still lists Produce from
v0 in ApiVersions, because librdkafka releases before the fix of KAFKA-18659 decide from
Produce's advertised minimum whether the broker accepts compressed batches. ``BrokerRegistry``
does the same: ``version_ranges()`` (what ApiVersions lists) starts at the advertised minimum,
``served_ranges()`` and ``lookup`` at the first served version; a request at a removed version
gets the API's refusal (every partition UNSUPPORTED_VERSION), never a closed connection.

The transaction coordinator's APIs and the partition side (WriteTxnMarkers, TxnOffsetCommit)
are served. The ACL APIs start at v1 (kio, like
Kafka 4, has no v0).

A handler is ``async def handle(ctx: RequestContext, request) -> response`` (see
``strata.broker.network.connection``); per-resource refusals inside a handler are
``ApiError`` s, turned into that resource's ``error_code`` / ``error_message``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import InvalidRequest
from strata.protocol.header import RequestHeader, peek_request_header
from strata.protocol.registry import HandlerRegistry, VersionRange


class ApiError(Exception):
    """A per-resource refusal (a topic, a config resource): Kafka's error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


Refusal = Callable[[int, bytes | memoryview], bytes | None]
"""``refusal(version, body) -> response body`` (None: no response) for a removed version."""


class BrokerRegistry(HandlerRegistry["Handler"]):
    """The handler registry plus versions advertised but refused (see the module docstring)."""

    __slots__ = ("_listed", "_removed")

    def __init__(self) -> None:
        super().__init__()
        self._removed: dict[int, tuple[int, Refusal]] = {}  # api key -> (listed from, refusal)
        self._listed: Mapping[ApiKey, VersionRange] | None = None  # built on first read

    def register(self, api_key: int, min_version: int, max_version: int,
                 handler: Handler) -> None:
        super().register(api_key, min_version, max_version, handler)
        self._listed = None

    def advertise_removed(self, api_key: ApiKey, min_version: int, refusal: Refusal) -> None:
        """List ``api_key`` from ``min_version`` (below its served range) and answer those
        versions with ``refusal``."""
        served = super().version_ranges()[api_key]
        if not 0 <= min_version < served.min_version:
            raise ValueError(f"{api_key.name}: {min_version} is not below {served}")
        self._removed[api_key] = (min_version, refusal)
        self._listed = None

    def served_ranges(self) -> Mapping[ApiKey, VersionRange]:
        """API key -> the versions a handler serves (kio decodes every one of them)."""
        return super().version_ranges()

    def version_ranges(self) -> Mapping[ApiKey, VersionRange]:
        """API key -> the versions ApiVersions lists: served ones, and removed ones below.
        Read per request by the connection: built once, after the last registration."""
        if self._listed is None:
            self._listed = MappingProxyType({
                key: (VersionRange(self._removed[key][0], r.max_version)
                      if key in self._removed else r)
                for key, r in super().version_ranges().items()})
        return self._listed

    def refuse(self, header: RequestHeader, frame: bytes) -> bytes | None:
        """The response body (v0 response header) refusing a request at a removed version, b""
        when it gets no response; None when the version is not a removed one or the body does
        not parse (then the connection closes, as for any request it cannot read)."""
        removed = self._removed.get(header.api_key)
        if removed is None or header.api_version < removed[0]:
            return None
        if header.api_version >= super().version_ranges()[ApiKey(header.api_key)].min_version:
            return None
        try:
            body = memoryview(frame)[peek_request_header(frame)[1]:]
            refused = removed[1](header.api_version, body)
        except (ValueError, InvalidRequest):
            return None
        return b"" if refused is None else refused


def build_registry() -> BrokerRegistry:
    """Every served API with its version range (the source of the advertised versions)."""
    # Imported here: the handler modules import ``ApiError`` from this package.
    from strata.broker.handlers import (
        add_offsets_to_txn,
        add_partitions_to_txn,
        alter_client_quotas,
        alter_configs,
        alter_partition_reassignments,
        alter_replica_log_dirs,
        alter_user_scram_credentials,
        api_versions,
        consumer_group_describe,
        consumer_group_heartbeat,
        create_acls,
        create_partitions,
        create_topics,
        delete_acls,
        delete_groups,
        delete_records,
        delete_topics,
        describe_acls,
        describe_client_quotas,
        describe_cluster,
        describe_configs,
        describe_groups,
        describe_log_dirs,
        describe_producers,
        describe_topic_partitions,
        describe_transactions,
        describe_user_scram_credentials,
        elect_leaders,
        end_txn,
        fetch,
        find_coordinator,
        get_telemetry_subscriptions,
        heartbeat,
        incremental_alter_configs,
        init_producer_id,
        join_group,
        leave_group,
        list_groups,
        list_offsets,
        list_partition_reassignments,
        list_transactions,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        offset_for_leader_epoch,
        produce,
        push_telemetry,
        sasl_authenticate,
        sasl_handshake,
        sync_group,
        txn_offset_commit,
        write_txn_markers,
    )
    routes: list[tuple[ApiKey, int, int, Handler]] = [
        (ApiKey.PRODUCE, 3, 13, produce.handle),
        (ApiKey.FETCH, 4, 18, fetch.handle),
        (ApiKey.LIST_OFFSETS, 1, 11, list_offsets.handle),
        (ApiKey.METADATA, 0, 13, metadata.handle),
        (ApiKey.API_VERSIONS, 0, 4, api_versions.handle),
        (ApiKey.CREATE_TOPICS, 2, 7, create_topics.handle),
        (ApiKey.DELETE_TOPICS, 1, 6, delete_topics.handle),
        (ApiKey.DELETE_RECORDS, 0, 2, delete_records.handle),
        (ApiKey.INIT_PRODUCER_ID, 0, 6, init_producer_id.handle),
        (ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions_to_txn.handle),
        (ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, add_offsets_to_txn.handle),
        (ApiKey.END_TXN, 0, 5, end_txn.handle),
        (ApiKey.DESCRIBE_CONFIGS, 1, 4, describe_configs.handle),
        (ApiKey.ALTER_CONFIGS, 0, 2, alter_configs.handle),
        (ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions.handle),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs.handle),
        (ApiKey.FIND_COORDINATOR, 0, 6, find_coordinator.handle),
        (ApiKey.JOIN_GROUP, 0, 9, join_group.handle),
        (ApiKey.SYNC_GROUP, 0, 5, sync_group.handle),
        (ApiKey.HEARTBEAT, 0, 4, heartbeat.handle),
        (ApiKey.LEAVE_GROUP, 0, 5, leave_group.handle),
        (ApiKey.OFFSET_COMMIT, 2, 9, offset_commit.handle),
        (ApiKey.OFFSET_FETCH, 1, 9, offset_fetch.handle),
        (ApiKey.DESCRIBE_GROUPS, 0, 6, describe_groups.handle),
        (ApiKey.LIST_GROUPS, 0, 5, list_groups.handle),
        (ApiKey.DELETE_GROUPS, 0, 2, delete_groups.handle),
        (ApiKey.OFFSET_DELETE, 0, 0, offset_delete.handle),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, offset_for_leader_epoch.handle),
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_group_heartbeat.handle),
        (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe.handle),
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
        (ApiKey.DESCRIBE_LOG_DIRS, 1, 5, describe_log_dirs.handle),
        (ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, alter_replica_log_dirs.handle),
        (ApiKey.DESCRIBE_PRODUCERS, 0, 0, describe_producers.handle),
        (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions.handle),
        (ApiKey.LIST_TRANSACTIONS, 0, 2, list_transactions.handle),
        (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions.handle),
        (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, describe_client_quotas.handle),
        (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter_client_quotas.handle),
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_telemetry_subscriptions.handle),
        (ApiKey.PUSH_TELEMETRY, 0, 0, push_telemetry.handle),
        (ApiKey.WRITE_TXN_MARKERS, 1, 2, write_txn_markers.handle),
        (ApiKey.TXN_OFFSET_COMMIT, 0, 5, txn_offset_commit.handle),
    ]
    registry = BrokerRegistry()
    for api_key, min_version, max_version, handler in routes:
        registry.register(api_key, min_version, max_version, handler)
    registry.advertise_removed(ApiKey.PRODUCE, 0, produce.refuse_removed_version)
    return registry


def served_versions() -> Mapping[ApiKey, VersionRange]:
    """API key -> the inclusive version range Strata serves (ApiVersions lists these, and
    the removed versions below them: ``BrokerRegistry.version_ranges()``)."""
    return build_registry().served_ranges()


from strata.broker.network.request_context import Handler  # noqa: E402 - after ApiError (import cycle)

__all__ = ["ApiError", "BrokerRegistry", "Handler", "Refusal", "build_registry",
           "served_versions"]
