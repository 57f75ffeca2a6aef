"""DescribeLogDirs: each broker's log dirs, their disk use and its replicas' sizes.

Owns the request Strata's tools (the admin service's web console) send for log dirs, which
librdkafka has no call for: v4 (the first with the file system's ``total_bytes`` and
``usable_bytes``) to every broker at once, one ``BrokerClient`` each (logged in with the
``QuotaTarget``'s security, as the other protocol-level calls of ``strata.client``), closed
when the call ends, each bounded by ``target.timeout_s``. A broker that does not answer is
reported in ``LogDirs.unreachable`` rather than failing the caller; a refusal
(CLUSTER_AUTHORIZATION_FAILED: the principal lacks Cluster Describe) is likewise kept per
broker.

The pure ``topic_sizes`` sums the replicas' sizes per topic (current logs only: a replica
being moved to another dir, ``is_future_key``, is counted once), as ``kafka-log-dirs.sh``
totals read: bytes on disk over every replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.client_quotas import QuotaTarget
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

VERSION: Final = 4
UNKNOWN: Final = -1

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LogDir:
    """One log directory of one broker (``error`` set: offline, sizes empty)."""

    broker: int
    path: str
    error: str | None
    total_bytes: int | None
    usable_bytes: int | None
    sizes: Mapping[TopicPartition, int] = field(default_factory=dict)

    @property
    def used_bytes(self) -> int | None:
        if self.total_bytes is None or self.usable_bytes is None:
            return None
        return self.total_bytes - self.usable_bytes

    @property
    def data_bytes(self) -> int:
        """Bytes of the replicas' logs in this dir."""
        return sum(self.sizes.values())


@dataclass(frozen=True, slots=True)
class LogDirs:
    dirs: list[LogDir]
    unreachable: dict[int, str]  # broker id -> why it gave no answer


def _known(value: Any) -> int | None:
    number = int(value)
    return None if number < 0 else number


def _dirs(broker: int, response: Any) -> list[LogDir]:
    if int(getattr(response, "error_code", 0)):
        raise RuntimeError(kafka_error_name(int(response.error_code)))
    out = []
    for result in response.results:
        code = int(result.error_code)
        sizes = {(str(t.name), int(p.partition_index)): int(p.partition_size)
                 for t in result.topics for p in t.partitions if not p.is_future_key}
        out.append(LogDir(broker, str(result.log_dir), kafka_error_name(code) if code else None,
                          _known(result.total_bytes), _known(result.usable_bytes), sizes))
    return out


async def _ask(target: QuotaTarget, broker: int, host: str, port: int,
               topics: Sequence[str] | None) -> list[LogDir]:
    client = BrokerClient(host, port, client_id=target.client_id,
                          request_timeout_s=target.timeout_s, connect_timeout_s=target.timeout_s,
                          security=target.security)
    try:
        response = await client.request(ApiKey.DESCRIBE_LOG_DIRS, VERSION, {
            "topics": None if topics is None else [{"topic": t, "partitions": []}
                                                   for t in topics]})
        return _dirs(broker, response)
    finally:
        await client.close()


async def describe_log_dirs(target: QuotaTarget, brokers: Mapping[int, tuple[str, int]],
                            topics: Sequence[str] | None = None) -> LogDirs:
    """Every broker's log dirs with the sizes of its replicas of ``topics`` (None: all)."""
    ids = sorted(brokers)
    answers = await asyncio.gather(
        *(_ask(target, b, brokers[b][0], brokers[b][1], topics) for b in ids),
        return_exceptions=True)
    dirs: list[LogDir] = []
    unreachable: dict[int, str] = {}
    for broker, answer in zip(ids, answers, strict=True):
        if isinstance(answer, (BrokerUnavailableError, RuntimeError, OSError, TimeoutError)):
            unreachable[broker] = str(answer) or type(answer).__name__
        elif isinstance(answer, BaseException):
            raise answer
        else:
            dirs += answer
    return LogDirs(dirs, unreachable)


def topic_sizes(dirs: Iterable[LogDir]) -> dict[str, int]:
    """Bytes on disk per topic, over every replica in every dir."""
    out: dict[str, int] = {}
    for log_dir in dirs:
        for (topic, _), size in log_dir.sizes.items():
            out[topic] = out.get(topic, 0) + size
    return out
