"""KafkaServer in process: startup from the registry, stray logs, adoption, clean shutdown."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from strata.broker.config import BrokerConfig
from strata.broker.handlers.create_topics import TopicSpec, create_topic
from strata.broker.server import KafkaServer
from strata.broker.topic_store import TOPIC_STORE_FILE_NAME, FileTopicStore
from strata.storage.clock import SystemClock
from strata.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager


def config(tmp_path: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig({"node.id": "3", "listeners": "PLAINTEXT://127.0.0.1:0",
                         "http.port": "0", "log.dirs": str(tmp_path / "data"),
                         **{k.replace("_", "."): v for k, v in extra.items()}})


async def started(tmp_path: Path, **extra: str) -> KafkaServer:
    server = KafkaServer(config(tmp_path, **extra))
    await server.start()
    return server


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


async def test_start_serves_and_shutdown_is_clean(tmp_path: Path) -> None:
    server = await started(tmp_path)
    assert server.ready and server.kafka_port != 0 and server.http_port != 0
    state = server.state
    assert state is not None and state.advertised_port == server.kafka_port
    status = await asyncio.to_thread(get, f"http://127.0.0.1:{server.http_port}/readyz")
    assert status == 200
    reader, writer = await asyncio.open_connection("127.0.0.1", server.kafka_port)
    await server.shutdown()
    assert await reader.read() == b""  # idle connections are closed
    writer.close()
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()
    assert not server.ready


async def test_restart_rehosts_topics_at_their_epochs_and_drops_strays(tmp_path: Path) -> None:
    server = await started(tmp_path)
    state = server.state
    assert state is not None
    cluster_id = state.cluster_id
    await create_topic(state, TopicSpec("kept", 2, 1, {"retention.ms": "5000"}))
    await state.topic_store.set_leader_epoch("kept", 1, 4)
    state.log_manager.get_or_create_log("stray", 0)  # a log the registry does not know
    await server.shutdown()

    again = await started(tmp_path)
    state = again.state
    assert state is not None
    assert state.cluster_id == cluster_id  # from meta.properties
    epochs = [p.leader_epoch for p in sorted(state.replica_manager.partitions(),
                                             key=lambda p: p.partition)]
    assert epochs == [0, 4]
    partition = state.replica_manager.get_partition("kept", 0)
    assert partition is not None and partition.log.config.retention_ms == 5000
    assert state.log_manager.get_log("stray", 0) is None
    assert not any(p.name.startswith("stray") for p in (tmp_path / "data").iterdir())
    await again.shutdown()


async def test_logs_without_a_registry_are_adopted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    logs = LogManager([data], {}, SystemClock())
    logs.startup()
    for partition in range(3):
        logs.get_or_create_log("legacy", partition)
    logs.shutdown()
    assert not (data / TOPIC_STORE_FILE_NAME).exists()

    server = await started(tmp_path)
    assert server.state is not None
    record = server.state.topic_store.get("legacy")
    assert record is not None and record.partitions == 3
    assert server.state.replica_manager.get_partition("legacy", 2) is not None
    await server.shutdown()
    assert FileTopicStore.open(data).get("legacy") is not None


async def test_the_cleaner_compacts_compacted_topics(tmp_path: Path) -> None:
    from .helpers import batch

    server = await started(tmp_path, log_cleaner_backoff_ms="20")
    state = server.state
    assert state is not None
    await create_topic(state, TopicSpec("compacted", 1, 1, {
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01"}))
    for i in range(60):
        results = await state.replica_manager.append_records(
            [(("compacted", 0), batch(b"value-%d" % i))], 1, 1000)
        assert results[0].error_code == 0
    log = state.log_manager.get_log("compacted", 0)
    assert log is not None
    before = log.size
    deadline = asyncio.get_running_loop().time() + 20
    while log.size >= before / 2:  # every record has key k0: one survives per cleaned range
        assert asyncio.get_running_loop().time() < deadline, "the cleaner never ran"
        await asyncio.sleep(0.05)
    await server.shutdown()
