"""DescribeLogDirs (key 35, v1-5, flexible from v2): this broker's ``log.dirs`` and their replicas.

What ``kafka-log-dirs.sh``, the admin clients' ``describe_log_dirs`` / ``describeLogDirs``,
Cruise Control and most Kafka UIs ask each broker. Per log directory: its absolute path, an
error (KAFKA_STORAGE_ERROR for a directory that went offline, with no topics), the hosted
replicas of the requested topics (``topics`` null: every hosted replica) with their size in
bytes and ``offset_lag``, and from v4 the file system's total and usable bytes.

Kafka's ``offset_lag`` of a current (not future) log is how far its log end offset is behind
the partition's high watermark, never negative: 0 on a leader and on a caught-up follower.
A replica moving to another log dir (AlterReplicaLogDirs) is listed twice, as Kafka
lists it: its current log in its dir and its future log in the destination with
``is_future_key`` true, the bytes copied so far and an ``offset_lag`` of how far the future
log's end is behind the current log's. No cordoned directories (v5 ``is_cordoned`` false).
A requested partition this broker does not host is left out, as Kafka does. Offline
partitions (a log that could not be loaded) are not listed.

Authorization: Describe on the Cluster; otherwise v3+ answers CLUSTER_AUTHORIZATION_FAILED at
the top level and v1-2 an empty result list (their response has no error field), as Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.log import Log


def _disk_bytes(directory: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``directory``; (-1, -1) if unknown."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


def _wanted(request: Any) -> dict[str, set[int]] | None:
    """topic -> requested partitions; None for every hosted replica."""
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = {}
    for topic in request.topics:
        wanted.setdefault(topic.topic, set()).update(topic.partitions)
    return wanted


_Replica = tuple[tuple[str, int], Log, Log | None]  # (tp, log, its current log if a future)


def _topics(logs: Iterable[_Replica]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), log, current in sorted(logs, key=lambda item: item[0]):
        behind = (log.high_watermark if current is None else current.log_end_offset)
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "partition_size": log.size,
            "offset_lag": max(0, behind - log.log_end_offset),
            "is_future_key": current is not None})
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return build_response(ApiKey.DESCRIBE_LOG_DIRS, version, throttle_time_ms=0,
                              error_code=ErrorCode.cluster_authorization_failed, results=[])
    log_manager = ctx.state.log_manager
    wanted = _wanted(request)
    per_dir: dict[Path, list[_Replica]] = {directory: [] for directory in log_manager.log_dirs}
    hosted = log_manager.all_logs()
    replicas: list[_Replica] = [(tp, log, None) for tp, log in hosted.items()]
    replicas += [(tp, future, hosted[tp]) for tp, future in log_manager.future_logs().items()
                 if tp in hosted]
    for (topic, partition), log, current in replicas:
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        per_dir.setdefault(log.dir.parent, []).append(((topic, partition), log, current))
    results = []
    for directory, logs in per_dir.items():
        offline = directory in log_manager.offline_dirs
        total, usable = _disk_bytes(directory)
        results.append({
            "log_dir": str(directory.resolve()),
            "error_code": ErrorCode.kafka_storage_error if offline else ErrorCode.none,
            "topics": [] if offline else _topics(logs),
            "total_bytes": total, "usable_bytes": usable, "is_cordoned": False,
        })
    return build_response(ApiKey.DESCRIBE_LOG_DIRS, version, throttle_time_ms=0,
                          error_code=ErrorCode.none, results=results)
