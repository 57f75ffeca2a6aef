"""Builders shared by the broker data-path tests: record batches, a ReplicaManager on a temp
log dir, and request objects (kio's request classes, as the connection hands them over)."""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.config import BrokerConfig
from strata.broker.handlers.create_topics import TopicSpec, create_topic
from strata.broker.network.request_context import RequestContext
from strata.broker.producer_id_manager import ProducerIdManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.server import KafkaServer
from strata.broker.topic_store import FileTopicStore
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_request
from strata.storage.clock import Clock, SystemClock
from strata.storage.log_manager import LogManager
from strata.storage.records import RecordSpec, build_batch

TOPIC_ID = uuid.UUID("6d1c1a5e-0000-4000-8000-000000000001")


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(*values: bytes, timestamp: int | None = None, **kwargs: Any) -> bytes:
    """One RecordBatch v2 holding ``values`` (keys k0, k1, ...), as a client sends it."""
    ts = now_ms() if timestamp is None else timestamp
    return build_batch([RecordSpec(key=b"k%d" % i, value=v, timestamp=ts)
                        for i, v in enumerate(values)], **kwargs)


def log_manager(tmp_path: Path, clock: Clock | None = None, **config: str) -> LogManager:
    props = {k.replace("_", "."): v for k, v in config.items()}
    lm = LogManager([tmp_path / "data"], props, clock or SystemClock(), cluster_id="c-1",
                    node_id=1)
    lm.startup()
    return lm


def replica_manager(tmp_path: Path, *topics: tuple[str, int], clock: Clock | None = None,
                    **config: str) -> ReplicaManager:
    """A ReplicaManager leading ``topics`` ((name, partition count) pairs) at epoch 0."""
    clock = clock or SystemClock()
    rm = ReplicaManager(log_manager(tmp_path, clock, **config), clock, node_id=1)
    for name, count in topics:
        for p in range(count):
            rm.make_leader(name, p, TOPIC_ID, 0)
    return rm


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A decoded request body of ``version`` from version-neutral fields."""
    return build_request(api_key, version, fields)


def broker_state(tmp_path: Path, *topics: tuple[str, int], clock: Clock | None = None,
                 **config: str) -> BrokerState:
    """A BrokerState as ``KafkaServer.start`` builds it, without sockets: one log dir under
    ``tmp_path``, ``topics`` hosted as leader at epoch 0, time from ``clock`` (the system's
    unless given)."""
    data = tmp_path / "data"
    settings = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data),
                **{k.replace("_", "."): v for k, v in config.items()}}
    clock = clock or SystemClock()
    rm = replica_manager(tmp_path, *topics, clock=clock, **config)
    return BrokerState(
        config=BrokerConfig(settings), node_id=1, cluster_id="c-1", clock=clock,
        log_manager=rm.log_manager, replica_manager=rm, topic_store=FileTopicStore.open(data),
        producer_id_manager=ProducerIdManager(data), advertised_host="127.0.0.1",
        advertised_port=9092,
    )


def context(state: BrokerState, api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 7, "test"), "127.0.0.1", 50000, state)


# ------------------------------------------------------------------------ consumer groups


def group_broker_state(tmp_path: Path, clock: Clock | None = None, **config: str) -> BrokerState:
    """A BrokerState like ``broker_state`` with an injected ``clock`` (a ``ManualClock`` for the
    group timers) and ``group.initial.rebalance.delay.ms`` 0 unless given. Its coordinator is
    not started: ``await state.group_coordinator.startup(run_timers=False)``, then drive the
    timers with ``tick()`` after moving the clock. Topics: ``await add_topics(state, ...)``."""
    data = tmp_path / "data"
    config.setdefault("group_initial_rebalance_delay_ms", "0")
    settings = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data),
                **{k.replace("_", "."): v for k, v in config.items()}}
    clock = clock or SystemClock()
    rm = replica_manager(tmp_path, clock=clock)
    return BrokerState(
        config=BrokerConfig(settings), node_id=1, cluster_id="c-1", clock=clock,
        log_manager=rm.log_manager, replica_manager=rm, topic_store=FileTopicStore.open(data),
        producer_id_manager=ProducerIdManager(data), advertised_host="127.0.0.1",
        advertised_port=9092,
    )


async def add_topics(state: BrokerState, *topics: tuple[str, int]) -> None:
    """Register and host ``(name, partition count)`` topics, as CreateTopics does."""
    for name, count in topics:
        await state.create_internal_topic(name, count, 1, {})


def consumer_subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (the consumer's JoinGroup metadata) naming ``topics``."""
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)  # user_data: null


def restarted_group_broker_state(state: BrokerState, tmp_path: Path,
                                 **config: str) -> BrokerState:
    """The broker of ``state`` after a restart on the same data dir: its logs closed and
    reopened, every registered topic hosted again (``KafkaServer.start``'s steps 2-4)."""
    state.log_manager.shutdown()
    restarted = group_broker_state(tmp_path, state.clock, **config)
    for record in restarted.topic_store.topics().values():
        for index in range(record.partitions):
            restarted.replica_manager.make_leader(record.name, index, record.topic_id,
                                                  record.leader_epochs[index],
                                                  configs=record.configs)
    return restarted


async def started_leader(tmp_path: Path, partitions: int) -> KafkaServer:
    """Broker 1 served in process on loopback (a replica fetcher's leader), with topic ``t`` of
    ``partitions`` partitions created; the caller shuts it down."""
    server = KafkaServer(BrokerConfig({
        "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "http.port": "0",
        "log.dirs": str(tmp_path / "leader"), "replica.lag.time.max.ms": "60000"}))
    await server.start()
    assert server.state is not None
    await create_topic(server.state, TopicSpec("t", partitions, 1, {}))
    return server
