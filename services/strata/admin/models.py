"""Every request and response body of the admin API, as pydantic models (the OpenAPI schemas).

Shapes scripts rely on (docs/admin-api.md): ``Cluster`` ``{cluster_id, controller,
brokers}``, ``TopicDescription`` ``{name, partitions: [{partition, leader, replicas, isr,
log_start_offset, high_watermark}], configs}``; names are Kafka's (``high_watermark``,
``log_end_offset``, ``replication_factor``). Input models validate what can be checked without
a broker (topic name grammar, partition counts, one reset target) so mistakes answer 422 before
any Kafka request; what only the broker knows (a config name, a partition count that shrinks)
comes back as the broker's error.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Kafka's topic name rule (Topic.validate): 1..249 of [a-zA-Z0-9._-], not "." or ".." (those
# two are refused by NewTopic's validator and, in paths, by the broker).
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
TopicName = Annotated[str, Field(pattern=TOPIC_NAME_PATTERN, min_length=1, max_length=249,
                                 examples=["orders"])]
ConfigName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[a-zA-Z0-9._-]+$")]
# Partition counts and replication factors an admin API accepts at once (-1: broker default).
MAX_PARTITIONS = 10_000
MAX_REPLICATION_FACTOR = 32
MAX_RECORDS_PER_REQUEST = 10_000
MAX_BROWSE_LIMIT = 1_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """RFC 9457 problem details; ``title`` is Kafka's error name where there is one."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    detail: str | None = None


# --------------------------------------------------------------------------- cluster, brokers
class Broker(BaseModel):
    id: int
    host: str
    port: int
    rack: str | None = None


class Cluster(BaseModel):
    cluster_id: str | None
    controller: int | None
    brokers: list[Broker]


class ConfigValue(BaseModel):
    value: str | None
    source: str
    read_only: bool = False
    sensitive: bool = False


class BrokerDescription(Broker):
    configs: dict[str, ConfigValue]


class GroupConfigs(BaseModel):
    """A group's configs (KIP-848), each with its source (GROUP_CONFIG or DEFAULT_CONFIG)."""

    group_id: str
    configs: dict[str, ConfigValue]


# ------------------------------------------------------------------------------------ topics
class TopicSummary(BaseModel):
    name: str
    partitions: int
    replication_factor: int
    internal: bool


class PartitionDescription(BaseModel):
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    log_start_offset: int | None
    high_watermark: int | None


class TopicDescription(BaseModel):
    name: str
    partitions: list[PartitionDescription]
    configs: dict[str, str | None]


class NewTopic(Strict):
    name: TopicName
    partitions: int = Field(-1, ge=-1, le=MAX_PARTITIONS,
                            description="Partition count; -1 = the broker's num.partitions.")
    replication_factor: int = Field(
        -1, ge=-1, le=MAX_REPLICATION_FACTOR,
        description="Replicas per partition; -1 = the broker's default.replication.factor.")
    configs: dict[ConfigName, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _not_zero(self) -> NewTopic:
        if self.name in (".", ".."):
            raise ValueError("a topic name cannot be '.' or '..'")
        if self.partitions == 0:
            raise ValueError("partitions must be -1 (the broker's default) or at least 1")
        if self.replication_factor == 0:
            raise ValueError("replication_factor must be -1 (the broker's default) or at "
                             "least 1")
        return self


class ConfigPatch(Strict):
    set: dict[ConfigName, str] = Field(default_factory=dict,
                                       description="Configs to set (IncrementalAlterConfigs).")
    delete: list[ConfigName] = Field(default_factory=list,
                                     description="Overrides to remove (back to the default).")

    @model_validator(mode="after")
    def _something_to_do(self) -> ConfigPatch:
        if not self.set and not self.delete:
            raise ValueError("nothing to change: give set or delete")
        both = sorted(set(self.set) & set(self.delete))
        if both:
            raise ValueError(f"{both[0]!r} is both set and deleted")
        return self


class TopicConfigs(BaseModel):
    name: str
    configs: dict[str, str | None]


class NewPartitions(Strict):
    count: int = Field(ge=1, le=MAX_PARTITIONS,
                       description="The new total partition count (only ever grows).")


# ----------------------------------------------------------------------------------- records
class Encoding(enum.StrEnum):
    """How keys, values and header values travel in JSON: UTF-8 text or base64."""

    TEXT = "text"
    BASE64 = "base64"


class Header(Strict):
    key: str
    value: str | None = None


class RecordIn(Strict):
    key: str | None = None
    value: str | None = None
    headers: list[Header] = Field(default_factory=list)
    partition: int | None = Field(None, ge=0, le=MAX_PARTITIONS,
                                  description="Partition to write to; none: the partitioner's.")


class RecordMetadata(BaseModel):
    partition: int
    offset: int


class RecordOut(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: str | None
    value: str | None
    headers: list[Header]


# ------------------------------------------------------------------------------------ groups
GroupType = Literal["classic", "consumer", "simple"]
"""Kafka's admin ``GroupType`` for a consumer group: ``classic`` (the JoinGroup/SyncGroup
protocol), ``consumer`` (KIP-848, ConsumerGroupHeartbeat), ``simple`` (a group that only stores
the offsets of ``assign()`` consumers)."""


class GroupSummary(BaseModel):
    group_id: str
    state: str
    type: Literal["consumer", "simple"] = Field(
        description="Whether the group has members' protocol (consumer) or only stores offsets "
                    "(simple); see group_type for the rebalance protocol.")
    group_type: GroupType = Field(description="The rebalance protocol (Kafka's GroupType).")


class TopicPartitionRef(BaseModel):
    topic: str
    partition: int


class GroupMember(BaseModel):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartitionRef]


class GroupOffset(BaseModel):
    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int | None
    lag: int | None
    member_id: str | None


class GroupDescription(BaseModel):
    group_id: str
    state: str
    group_type: GroupType = Field(description="The rebalance protocol (Kafka's GroupType).")
    protocol: str | None
    coordinator: int | None
    members: list[GroupMember]
    offsets: list[GroupOffset]


class ResetTarget(enum.StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    OFFSET = "offset"


class TopicSelection(Strict):
    topic: TopicName
    partitions: list[Annotated[int, Field(ge=0, le=MAX_PARTITIONS)]] | None = Field(
        None, description="Some partitions; none: every partition of the topic.")


class OffsetReset(Strict):
    to: ResetTarget
    timestamp: int | None = Field(None, ge=0, description="Epoch ms, for to=timestamp.")
    offset: int | None = Field(None, ge=0, description="The offset, for to=offset.")
    topics: list[TopicSelection] | None = Field(
        None, description="Partitions to reset; none: every partition with a committed offset.")

    @model_validator(mode="after")
    def _target_complete(self) -> OffsetReset:
        if self.to is ResetTarget.TIMESTAMP and self.timestamp is None:
            raise ValueError("to=timestamp needs timestamp (epoch ms)")
        if self.to is ResetTarget.OFFSET and self.offset is None:
            raise ValueError("to=offset needs offset")
        return self


class OffsetResetResult(BaseModel):
    group_id: str
    offsets: list[GroupOffset]


# ------------------------------------------------------------------------------ client quotas
QuotaEntityType = Literal["user", "client-id", "ip"]
QuotaKey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z_]+$",
                                examples=["producer_byte_rate"])]


class QuotaEntityPart(Strict):
    """One part of a quota entity; ``name`` null is the type's default entity."""

    type: QuotaEntityType
    name: str | None = Field(default=None, min_length=1, max_length=255)


class ClientQuota(BaseModel):
    """An entity and its quotas (Kafka's keys: ``producer_byte_rate``, ``consumer_byte_rate``,
    ``request_percentage``, ``controller_mutation_rate``; ``connection_creation_rate``)."""

    entity: list[QuotaEntityPart]
    quotas: dict[str, float]


class QuotaAlteration(Strict):
    """Set and remove quotas of one entity (AlterClientQuotas)."""

    entity: list[QuotaEntityPart] = Field(min_length=1, max_length=2)
    set: dict[QuotaKey, float] = Field(default_factory=dict)
    remove: list[QuotaKey] = Field(default_factory=list)
    validate_only: bool = False

    @model_validator(mode="after")
    def _changes_something(self) -> QuotaAlteration:
        if not self.set and not self.remove:
            raise ValueError("give quotas to set and/or remove")
        if set(self.set) & set(self.remove):
            raise ValueError("a quota cannot be set and removed at once")
        return self
