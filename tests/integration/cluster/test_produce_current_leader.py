"""KIP-951 on a real cluster: a Produce (v10-v13) sent to a broker that only follows the
partition answers NOT_LEADER_OR_FOLLOWER with the leader's id and epoch in ``current_leader``
and its endpoint in ``node_endpoints``, so the client can move without a Metadata round trip.
Requests and responses are kafka-python's own protocol classes, sent by its network client."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.handlers import served_versions
from strata.protocol import ApiKey
from strata.storage.records import RecordSpec, build_batch

from .cluster_processes import cluster_on

pytestmark = pytest.mark.integration

PRODUCE_MAX = served_versions()[ApiKey.PRODUCE].max_version


def partition_topic_id(data_dir: Path, topic: str) -> uuid.UUID:
    """The topic id in the replica's ``partition.metadata`` (Kafka's Uuid string)."""
    text = (data_dir / f"{topic}-0" / "partition.metadata").read_text()
    value = next(line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("topic_id"))
    return uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=="))


def test_a_follower_names_the_current_leader(tmp_path: Path) -> None:
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.producer import ProduceRequest

    with cluster_on("sqlite", tmp_path, brokers=2) as cluster:
        cluster.create_topic("kip951", assignment=[[0, 1]])
        view = cluster.wait_for(lambda: cluster.partition("kip951", via=1), "kip951 on broker 1")
        assert view.leader == 0
        leader = cluster.broker(0)
        follower = cluster.broker(1)
        topic_id = partition_topic_id(follower.data_dir, "kip951")
        client = KafkaNetClient(bootstrap_servers=follower.bootstrap)
        try:
            client._manager.bootstrap(timeout_ms=30_000)
            data = ProduceRequest.TopicProduceData
            for version in range(10, PRODUCE_MAX + 1):
                request = ProduceRequest(
                    transactional_id=None, acks=1, timeout_ms=5000, min_version=version,
                    max_version=version,
                    topic_data=[data(name="kip951", topic_id=topic_id, partition_data=[
                        data.PartitionProduceData(index=0, records=build_batch(
                            [RecordSpec(key=b"k", value=b"v")]))])])
                response: Any = client.send_and_receive(1, request, timeout_ms=30_000)
                assert response.version == version
                (answer,) = response.responses[0].partition_responses
                assert answer.error_code == 6, version  # NOT_LEADER_OR_FOLLOWER
                assert answer.current_leader.leader_id == 0, version
                assert answer.current_leader.leader_epoch >= 0, version
                endpoints = [(n.node_id, n.host, n.port) for n in response.node_endpoints]
                assert endpoints == [(0, "127.0.0.1", leader.port)], version
                print(f"kafka-python Produce v{version} to the follower: current leader "
                      f"{answer.current_leader.leader_id} at {endpoints[0][1:]}")
        finally:
            client.close()
