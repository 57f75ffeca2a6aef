"""The version table: which Kafka APIs Strata serves, and at which versions.

Owns ``SUPPORTED_VERSIONS``, the single typed-once statement of ARCHITECTURE.md §5. The broker's
handler registry (``strata.protocol.registry.HandlerRegistry``) is checked against it, and the
advertised ApiVersions ranges are derived from that registry, so the numbers below are never
written anywhere else. On the wire each range becomes one ApiVersions entry::

    ApiVersion => api_key:INT16 min_version:INT16 max_version:INT16   (both bounds inclusive)

Invariants (each checked by a unit test):

- every (api key, version) in the table has a request and a response class in kio;
- every version is non-flexible except where Kafka has no other: ApiVersions v3 (flexible body,
  but its response still uses response header v0, KIP-511), IncrementalAlterConfigs v1 (Kafka's
  first flexible version of that API), ListGroups v3-4 (group states, KIP-518), DescribeCluster
  and Describe/AlterUserScramCredentials (flexible-only). Other APIs are raised
  to flexible versions once tagged fields are handled end to end;
- ranges are inclusive and ``0 <= min_version <= max_version``.

Not in the table yet, on purpose: the transaction APIs (not built; an InitProducerId with a
transactional id gets a clear error instead). The ACL APIs are served at v1 only (kio, like
Kafka 4, has no v0; every client in use speaks v1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from strata.protocol.api_keys import ApiKey


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of API versions, as one ApiVersions response entry carries it."""

    min_version: int
    max_version: int

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise ValueError(f"invalid version range {self.min_version}..{self.max_version}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version

    def versions(self) -> range:
        """Every version in the range, lowest first."""
        return range(self.min_version, self.max_version + 1)

    def __str__(self) -> str:
        return f"{self.min_version}-{self.max_version}"


SUPPORTED_VERSIONS: Final[Mapping[ApiKey, VersionRange]] = MappingProxyType(
    {
        ApiKey.PRODUCE: VersionRange(3, 8),
        ApiKey.FETCH: VersionRange(4, 11),
        ApiKey.LIST_OFFSETS: VersionRange(1, 5),
        ApiKey.METADATA: VersionRange(0, 8),
        ApiKey.OFFSET_COMMIT: VersionRange(2, 7),
        ApiKey.OFFSET_FETCH: VersionRange(1, 5),
        ApiKey.FIND_COORDINATOR: VersionRange(0, 2),
        ApiKey.JOIN_GROUP: VersionRange(0, 5),
        ApiKey.HEARTBEAT: VersionRange(0, 3),
        ApiKey.LEAVE_GROUP: VersionRange(0, 3),
        ApiKey.SYNC_GROUP: VersionRange(0, 3),
        ApiKey.DESCRIBE_GROUPS: VersionRange(0, 4),
        ApiKey.LIST_GROUPS: VersionRange(0, 4),
        ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
        ApiKey.API_VERSIONS: VersionRange(0, 3),
        ApiKey.CREATE_TOPICS: VersionRange(2, 4),
        ApiKey.DELETE_TOPICS: VersionRange(1, 3),
        ApiKey.DELETE_RECORDS: VersionRange(0, 1),
        ApiKey.INIT_PRODUCER_ID: VersionRange(0, 1),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 3),
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 3),
        ApiKey.ALTER_CONFIGS: VersionRange(0, 1),
        ApiKey.SASL_AUTHENTICATE: VersionRange(0, 1),
        ApiKey.CREATE_PARTITIONS: VersionRange(0, 1),
        ApiKey.DELETE_GROUPS: VersionRange(0, 1),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
        ApiKey.OFFSET_DELETE: VersionRange(0, 0),
        ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 1),
        ApiKey.ELECT_LEADERS: VersionRange(0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
        ApiKey.DESCRIBE_ACLS: VersionRange(1, 1),
        ApiKey.CREATE_ACLS: VersionRange(1, 1),
        ApiKey.DELETE_ACLS: VersionRange(1, 1),
    }
)
"""API key -> the inclusive version range Strata serves (ARCHITECTURE.md §5)."""
