"""The operator's side of KIP-113: DescribeLogDirs (api key 35) and AlterReplicaLogDirs (api
key 34) sent to each broker with Strata's own Kafka protocol client, as ``reassign.py`` sends
AlterPartitionReassignments (confluent-kafka's AdminClient has neither call).

Both requests are per broker (a log dir belongs to one broker), so ``brokers`` first asks the
bootstrap for Metadata (the brokers' advertised addresses), then each call connects to the
broker it is about. Logged in as the operator's other clients (``reassign.security_of``). A
broker that cannot be asked raises ``LogDirsUnavailable`` with the reason; per-replica errors
of AlterReplicaLogDirs come back by Kafka's error names. Nothing here decides anything
(``jbod.plan_moves`` does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.operator.jbod import BrokerDirs, TopicPartition
from strata.operator.reassign import CLIENT_ID, ReassignmentUnavailable, security_of
from strata.protocol.api_keys import ApiKey

METADATA_VERSION: Final = 1
DESCRIBE_VERSION: Final = 3  # the first with a top-level error_code
ALTER_VERSION: Final = 1


class LogDirsUnavailable(RuntimeError):
    """A broker could not be asked (unreachable, TLS or login refused, or it refused)."""


async def _ask(host: str, port: int, api: ApiKey, version: int, fields: Mapping[str, Any],
               timeout_s: float, client_config: Mapping[str, str]) -> Any:
    try:
        security = security_of(client_config)
    except ReassignmentUnavailable as exc:
        raise LogDirsUnavailable(str(exc)) from None
    client = BrokerClient(host, port, client_id=CLIENT_ID, request_timeout_s=timeout_s,
                          connect_timeout_s=timeout_s, security=security)
    try:
        return await client.request(api, version, fields)
    except BrokerUnavailableError as exc:
        raise LogDirsUnavailable(f"broker {host}:{port}: {exc}") from None
    finally:
        await client.close()


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


def brokers(bootstrap: str, timeout: float,
            client_config: Mapping[str, str] | None = None) -> dict[int, tuple[str, int]]:
    """node id -> advertised (host, port), from a Metadata request to the bootstrap."""
    host, port = _host_port(bootstrap)
    body = asyncio.run(_ask(host, port, ApiKey.METADATA, METADATA_VERSION, {"topics": []},
                            timeout, client_config or {}))
    return {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}


def describe(address: tuple[str, int], timeout: float,
             client_config: Mapping[str, str] | None = None) -> BrokerDirs:
    """Every log dir of the broker at ``address`` and the replicas in it (current and future
    logs apart). An offline dir is reported as an error: its replicas cannot be known."""
    body = asyncio.run(_ask(*address, ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_VERSION,
                            {"topics": None}, timeout, client_config or {}))
    if int(body.error_code) != 0:
        raise LogDirsUnavailable(f"DescribeLogDirs {address[0]}:{address[1]}: "
                                 f"{body.error_code.name.upper()}")
    current: dict[str, frozenset[TopicPartition]] = {}
    future: dict[str, frozenset[TopicPartition]] = {}
    for result in body.results:
        if int(result.error_code) != 0:
            raise LogDirsUnavailable(f"DescribeLogDirs {address[0]}:{address[1]}: log dir "
                                     f"{result.log_dir} {result.error_code.name.upper()}")
        replicas = [((str(t.name), int(p.partition_index)), bool(p.is_future_key))
                    for t in result.topics for p in t.partitions]
        current[str(result.log_dir)] = frozenset(tp for tp, f in replicas if not f)
        future[str(result.log_dir)] = frozenset(tp for tp, f in replicas if f)
    return BrokerDirs(current, future)


def alter(address: tuple[str, int], moves: Mapping[TopicPartition, str], timeout: float,
          client_config: Mapping[str, str] | None = None) -> dict[TopicPartition, str]:
    """Ask the broker at ``address`` to move each replica to its dir; the error name of each
    replica it refused (empty: every move started)."""
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in sorted(moves.items()):
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    fields = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": p}
                                                 for t, p in topics.items()]}
                       for path, topics in by_dir.items()]}
    body = asyncio.run(_ask(*address, ApiKey.ALTER_REPLICA_LOG_DIRS, ALTER_VERSION, fields,
                            timeout, client_config or {}))
    return {(str(t.topic_name), int(p.partition_index)): p.error_code.name.upper()
            for t in body.results for p in t.partitions if int(p.error_code) != 0}
