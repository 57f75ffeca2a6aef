"""AlterReplicaLogDirs v1-2 through the handler: every version round-trips through kio, errors
per partition as Kafka answers them, a move runs to its swap while appends keep arriving, and
DescribeLogDirs lists the future replica until then."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.config import BrokerConfig
from strata.broker.handlers import alter_replica_log_dirs, describe_log_dirs
from strata.broker.producer_id_manager import ProducerIdManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.topic_store import FileTopicStore
from strata.protocol import ApiKey, encode_response
from strata.protocol.codec import decode_response
from strata.protocol.error_codes import ErrorCode
from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.clock import SystemClock
from strata.storage.log_manager import LogManager

from ..storage.test_future_log import read_values
from .helpers import TOPIC_ID, batch, context, request


def two_dir_state(tmp_path: Path, *topics: tuple[str, int], dirs: str = "ab") -> BrokerState:
    """A BrokerState whose broker has ``log.dirs`` a and b (or ``dirs``), leading ``topics``
    at epoch 0."""
    log_dirs = [tmp_path / name for name in dirs]
    return _state(log_dirs, *topics)


def _state(dirs: list[Path], *topics: tuple[str, int]) -> BrokerState:
    settings = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": ",".join(map(str, dirs))}
    clock = SystemClock()
    lm = LogManager(dirs, {}, clock, cluster_id="c-1", node_id=1)
    lm.startup()
    rm = ReplicaManager(lm, clock, node_id=1)
    for name, count in topics:
        for p in range(count):
            rm.make_leader(name, p, TOPIC_ID, 0)
    return BrokerState(
        config=BrokerConfig(settings), node_id=1, cluster_id="c-1", clock=clock,
        log_manager=lm, replica_manager=rm, topic_store=FileTopicStore.open(dirs[0]),
        producer_id_manager=ProducerIdManager(dirs[0]), advertised_host="127.0.0.1",
        advertised_port=9092)


def other_dir(state: BrokerState, topic: str, partition: int) -> Path:
    return other_dirs(state, topic, partition)[0]


def other_dirs(state: BrokerState, topic: str, partition: int) -> list[Path]:
    log = state.log_manager.get_log(topic, partition)
    assert log is not None
    return [d for d in state.log_manager.log_dirs if d != log.dir.parent]


async def call(state: BrokerState, api_key: ApiKey, version: int, **fields: Any) -> Any:
    ctx = context(state, api_key, version)
    handler = alter_replica_log_dirs if api_key == ApiKey.ALTER_REPLICA_LOG_DIRS \
        else describe_log_dirs
    response = await handler.handle(ctx, request(api_key, version, **fields))
    frame = encode_response(ctx.header, response)
    _, decoded = decode_response(frame[4:], api_key, version)
    assert decoded == response
    return decoded


def alter(path: str | Path, topic: str, *partitions: int) -> dict[str, Any]:
    return {"path": str(path), "topics": [{"name": topic, "partitions": list(partitions)}]}


def errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {(t.topic_name, p.partition_index): p.error_code
            for t in response.results for p in t.partitions}


class _DenyAll:
    def authorize(self, *args: object) -> bool:
        return False


@pytest.mark.parametrize("version", [1, 2])
async def test_errors_per_partition(tmp_path: Path, version: int) -> None:
    state = two_dir_state(tmp_path, ("t", 2))
    target = other_dir(state, "t", 0)
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, version, dirs=[
        alter(tmp_path / "nowhere", "t", 0),
        alter("a", "t", 1),  # not absolute
        alter(target, "u", 0),  # not hosted: remembered for its creation
        alter(target, "x" * 249, 0),  # its future dir name would pass 255 bytes
        alter(target, "", -1),  # nothing that could be hosted
    ])
    assert errors(response) == {
        ("t", 0): ErrorCode.log_dir_not_found, ("t", 1): ErrorCode.log_dir_not_found,
        ("u", 0): ErrorCode.replica_not_available,
        ("x" * 249, 0): ErrorCode.invalid_topic_exception,
        ("", -1): ErrorCode.replica_not_available}
    state.replica_manager.make_leader("u", 0, TOPIC_ID, 0)
    log = state.log_manager.get_log("u", 0)
    assert log is not None and log.dir.parent == target


async def test_offline_dir_and_cluster_authorization(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    target = other_dir(state, "t", 0)
    state.log_manager.offline_dirs.add(target)
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(target, "t", 0)])
    assert errors(response) == {("t", 0): ErrorCode.kafka_storage_error}
    state.log_manager.offline_dirs.clear()
    state.authorizer = _DenyAll()  # type: ignore[assignment]
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(target, "t", 0)])
    assert errors(response) == {("t", 0): ErrorCode.cluster_authorization_failed}
    assert state.log_manager.future_log("t", 0) is None


async def test_moving_to_its_own_dir_does_nothing(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    log = state.log_manager.get_log("t", 0)
    assert log is not None
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 1,
                          dirs=[alter(log.dir.parent.resolve(), "t", 0)])
    assert errors(response) == {("t", 0): ErrorCode.none}
    assert state.log_manager.future_log("t", 0) is None
    assert state.log_manager.get_log("t", 0) is log


async def test_describe_log_dirs_lists_the_future_replica(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    partition = state.replica_manager.get_partition_or_error("t", 0)
    partition.append_records_to_leader(batch(b"a", b"b"), required_acks=1)
    target = other_dir(state, "t", 0)
    future = state.log_manager.create_future_log("t", 0, target)  # no mover: stays behind
    assert future is not None
    response = await call(state, ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
    listed = {(r.log_dir, p.is_future_key): (p.partition_size, p.offset_lag)
              for r in response.results for t in r.topics for p in t.partitions}
    assert listed == {
        (str(partition.log.dir.parent.resolve()), False): (partition.log.size, 0),
        (str(target.resolve()), True): (0, 2)}


async def test_a_move_completes_while_appends_keep_arriving(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    partition = state.replica_manager.get_partition_or_error("t", 0)
    for i in range(200):
        partition.append_records_to_leader(batch(b"before-%d" % i, b"x" * 2000), required_acks=1)
    source = partition.log
    target = other_dir(state, "t", 0)
    cleaner = state.log_manager.cleaner.manager
    cleaner.update_checkpoints(source.dir.parent, (("t", 0), 100))  # clean below 100
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(target, "t", 0)])
    assert errors(response) == {("t", 0): ErrorCode.none}
    movers = state.log_dir_movers
    appended = 0
    deadline = time.monotonic() + 30
    while ("t", 0) in movers.moving():  # one append between two steps of the mover
        assert time.monotonic() < deadline, "the move did not complete"
        partition.append_records_to_leader(batch(b"during-%d" % appended), required_acks=1)
        appended += 1
        future = state.log_manager.future_log("t", 0)
        copied = future.log_end_offset if future is not None else None
        await asyncio.sleep(0)
        while ("t", 0) in movers.moving() and future is not None and \
                future.log_end_offset == copied:
            assert time.monotonic() < deadline, "the mover stopped copying"
            await asyncio.sleep(0)
    assert appended > 1
    await movers.wait("t", 0)
    assert partition.log is not source and partition.log.dir == target / "t-0"
    assert state.log_manager.get_log("t", 0) is partition.log
    assert partition.log_end_offset == 400 + appended
    expected = [value for i in range(200) for value in (b"before-%d" % i, b"x" * 2000)]
    expected += [b"during-%d" % i for i in range(appended)]
    assert [value for _, value in read_values(partition.log)] == expected
    partition.append_records_to_leader(batch(b"after"), required_acks=1)
    assert partition.log_end_offset == 401 + appended
    assert not any(d.name.startswith("t-0") and d.name.endswith("-future")
                   for d in target.iterdir())
    checkpoints = {d: OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
                   for d in state.log_manager.log_dirs}
    assert ("t", 0) in checkpoints[target] and ("t", 0) not in checkpoints[source.dir.parent]
    assert OffsetCheckpointFile(target / "cleaner-offset-checkpoint").read() == {("t", 0): 100}
    assert cleaner.cleaning_state(("t", 0)) is None  # no longer paused


def fill(state: BrokerState, topic: str, batches: int) -> None:
    partition = state.replica_manager.get_partition_or_error(topic, 0)
    for i in range(batches):
        partition.append_records_to_leader(batch(b"v%d" % i, b"x" * 4000), required_acks=1)


async def test_a_move_elsewhere_replaces_the_running_one(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1), dirs="abc")
    fill(state, "t", 300)
    first, second = other_dirs(state, "t", 0)
    movers = state.log_dir_movers
    await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(first, "t", 0)])
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(second, "t", 0)])
    assert errors(response) == {("t", 0): ErrorCode.none}
    assert [d.name for d in first.iterdir() if d.name.startswith("t-0")] == []
    await asyncio.wait_for(movers.wait("t", 0), 30)
    log = state.log_manager.get_log("t", 0)
    assert log is not None and log.dir == second / "t-0" and log.log_end_offset == 600
    assert state.replica_manager.get_partition_or_error("t", 0).log is log


async def test_deleting_a_moving_partition_ends_its_move(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    fill(state, "t", 300)
    target = other_dir(state, "t", 0)
    movers = state.log_dir_movers
    await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, dirs=[alter(target, "t", 0)])
    await asyncio.to_thread(state.log_manager.delete_log, "t", 0)
    await asyncio.wait_for(movers.wait("t", 0), 30)
    assert state.log_manager.future_log("t", 0) is None
    assert [d.name for d in target.iterdir() if d.name.startswith("t-0")] == []
    assert target not in state.log_manager.offline_dirs


async def test_a_move_a_restart_cut_off_starts_again_once_the_partition_is_hosted(
        tmp_path: Path) -> None:
    state = two_dir_state(tmp_path)
    lm = state.log_manager
    target = lm.log_dirs[1]
    lm.interrupted_moves[("t", 0)] = target  # as a restart found it (test_future_log)
    assert state.log_dir_movers.resume_interrupted() == 0  # not hosted yet: kept for later
    assert ("t", 0) in lm.interrupted_moves
    state.replica_manager.make_leader("t", 0, TOPIC_ID, 0)
    partition = state.replica_manager.get_partition_or_error("t", 0)
    if partition.log.dir.parent == target:  # created in the destination: nothing to move
        target = lm.log_dirs[0]
        lm.interrupted_moves[("t", 0)] = target
    fill(state, "t", 20)
    assert state.log_dir_movers.resume_interrupted() == 1
    assert not lm.interrupted_moves
    await state.log_dir_movers.wait("t", 0)
    assert partition.log.dir == target / "t-0" and partition.log_end_offset == 40


async def test_a_new_request_supersedes_a_cut_off_move(tmp_path: Path) -> None:
    state = two_dir_state(tmp_path, ("t", 1))
    lm = state.log_manager
    here = lm.get_log("t", 0)
    assert here is not None
    lm.interrupted_moves[("t", 0)] = other_dir(state, "t", 0)
    response = await call(state, ApiKey.ALTER_REPLICA_LOG_DIRS, 2,
                          dirs=[alter(here.dir.parent, "t", 0)])  # stay where it is
    assert errors(response) == {("t", 0): ErrorCode.none}
    assert not lm.interrupted_moves and state.log_dir_movers.resume_interrupted() == 0
