"""AlterReplicaLogDirs (key 34, v1-2, flexible from v2): move replicas between this broker's
``log.dirs`` (KIP-113; ``kafka-reassign-partitions.sh`` with log dirs, the admin clients'
``alterReplicaLogDirs`` / ``alter_replica_log_dirs``).

Each (topic, partition) names its destination, an absolute path as DescribeLogDirs lists it
(a partition named twice: the last one counts, as Kafka's request map). Answered per
partition as Kafka's ``ReplicaManager.alterReplicaLogDirs``, in this order:

* INVALID_TOPIC_EXCEPTION for a topic name too long for its future log's directory name
  (over 255 bytes, KAFKA-4893);
* LOG_DIR_NOT_FOUND when the path is none of ``log.dirs``, KAFKA_STORAGE_ERROR when that dir
  is offline or the partition's own log is offline;
* the destination is remembered as the partition's preferred dir: a partition not hosted yet
  will be created there; it is answered REPLICA_NOT_AVAILABLE;
* NONE otherwise: a move to another dir starts (a future log copies the current one and is
  swapped in when caught up, ``replication.replica_alter_log_dirs``), replacing a move to a
  different dir; nothing happens when the replica is already there or already moving there.
  KAFKA_STORAGE_ERROR while any log dir is offline (Kafka creates no future log then).

The response says the move started, not that it finished: DescribeLogDirs lists the future
replica (``is_future_key``) until the swap.

Authorization: Alter on the Cluster, else every partition CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage import log_file_names as names
from strata.storage.errors import StorageError

MAX_FILE_NAME_BYTES = 255  # a directory name's limit on the file systems Kafka runs on


def _requested(request: Any) -> dict[tuple[str, int], str]:
    """(topic, partition) -> destination path, in request order; the last naming wins."""
    wanted: dict[tuple[str, int], str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                wanted[(topic.name, index)] = entry.path
    return wanted


async def _alter(ctx: RequestContext, topic: str, index: int, path: str) -> ErrorCode:
    future_dir_name = f"{topic}-{index}.{'0' * 32}{names.FUTURE_DIR_SUFFIX}"  # any name
    if len(future_dir_name.encode()) > MAX_FILE_NAME_BYTES:
        return ErrorCode.invalid_topic_exception
    log_manager = ctx.state.log_manager
    try:
        destination: Path = log_manager.log_dir_for_path(path)
    except StorageError as exc:
        return ErrorCode(exc.error_code)
    if (topic, index) in log_manager.offline_partitions:
        return ErrorCode.kafka_storage_error
    log_manager.maybe_update_preferred_log_dir(topic, index, destination)
    log_manager.interrupted_moves.pop((topic, index), None)  # this request supersedes it
    if ctx.state.replica_manager.get_partition(topic, index) is None or \
            log_manager.get_log(topic, index) is None:
        return ErrorCode.replica_not_available
    movers = ctx.state.log_dir_movers
    moving = log_manager.future_log(topic, index)
    if moving is not None and moving.dir.parent != destination:
        await movers.stop(topic, index)  # the older move ends before its future log goes
    try:
        future = log_manager.create_future_log(topic, index, destination)
    except StorageError as exc:
        return ErrorCode(exc.error_code)
    if future is not None:
        movers.add_partition(topic, index, future)
    return ErrorCode.none


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = _requested(request)
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), path in wanted.items():
        error = await _alter(ctx, topic, index, path) if allowed \
            else ErrorCode.cluster_authorization_failed
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    return build_response(ApiKey.ALTER_REPLICA_LOG_DIRS, ctx.header.api_version,
                          throttle_time_ms=0,
                          results=[{"topic_name": name, "partitions": partitions}
                                   for name, partitions in by_topic.items()])
