"""A 3-broker cluster whose followers fetch over SASL_SSL with SCRAM-SHA-512.

Each broker serves PLAINTEXT (clients) and INTERNAL (``SASL_SSL``, the
``inter.broker.listener.name``); the brokers' own user is created in the SQLite metadata store by
``strata users create --metadata-store``. A topic with ``min.insync.replicas=3`` accepts
``acks=all`` writes only while both followers fetch, i.e. log in to the leader's INTERNAL
listener with their credentials and verify its certificate; then the ISR holds all three.
Metadata asked on INTERNAL answers INTERNAL endpoints (Kafka's listener rule).

On the same cluster, the operator's scale-down move: ``KafkaCluster.reassign`` reaches the
controller's INTERNAL listener with the settings the operator builds for a SASL_SSL inter-broker
listener (CA as PEM text, the brokers' user) and the partition really moves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from strata.operator.kafka import KafkaCluster

from ..broker_process import STRATA, create_user, free_port
from ..cluster.cluster_processes import ClusterProcesses
from .conftest import PkiFiles, tls_config

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="inter-broker-secret";')


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory, pki: PkiFiles
                    ) -> Iterator[tuple[ClusterProcesses, dict[str, int]]]:
    """The cluster and each node's INTERNAL port."""
    assert STRATA.exists()
    tmp_path = tmp_path_factory.mktemp("inter-broker")
    store_url = f"sqlite:///{tmp_path / 'meta.db'}"
    create_user("broker", "inter-broker-secret", "--mechanism", "SCRAM-SHA-512",
                "--metadata-store", store_url)
    cluster = ClusterProcesses(tmp_path, store_url, 3, {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS,
        **tls_config(pki)})
    internal_ports = {}
    for broker in cluster.brokers:
        internal_ports[broker.config["node.id"]] = port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{broker.port},INTERNAL://127.0.0.1:{port}"
        broker.config.update({"listeners": listeners, "advertised.listeners": listeners})
    try:
        cluster.start()
        yield cluster, internal_ports
    finally:
        cluster.stop()


def test_replication_over_sasl_ssl_inter_broker_listener(
        secured_cluster: tuple[ClusterProcesses, dict[str, int]], pki: PkiFiles) -> None:
    cluster, internal_ports = secured_cluster
    cluster.create_topic("replicated", 1, 3, {"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 30000, "log_level": 0})
    errors: list[object] = []
    for i in range(50):
        producer.produce("replicated", f"v{i}".encode(),
                         on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0
    assert errors == [None] * 50
    view = cluster.wait_for(lambda: (p := cluster.partition("replicated")) is not None
                            and len(p.isr) == 3 and p, "an ISR of three")
    assert sorted(view.isr) == [0, 1, 2]

    internal = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{internal_ports['0']}",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "broker", "sasl.password": "inter-broker-secret",
        "ssl.ca.location": str(pki.ca.ca_cert), "log_level": 0})
    brokers = internal.list_topics(timeout=20).brokers
    assert {str(b.id): b.port for b in brokers.values()} == internal_ports
    for broker in cluster.brokers:
        assert "SaslClientError" not in broker.log_path.read_text()


def test_operator_moves_a_partition_over_the_secured_listener(
        secured_cluster: tuple[ClusterProcesses, dict[str, int]], pki: PkiFiles) -> None:
    cluster, internal_ports = secured_cluster
    cluster.create_topic("leaving", 1, 1)
    operator_view = KafkaCluster(
        ",".join(f"127.0.0.1:{p}" for p in internal_ports.values()), timeout=10.0,
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": "broker", "sasl.password": "inter-broker-secret",
                       "ssl.ca.pem": pki.ca.ca_cert.read_text()})
    [old] = operator_view.assignment()[("leaving", 0)]
    target = (old + 1) % 3
    assert operator_view.reassign({("leaving", 0): (target,)}) is True
    moved = cluster.wait_for(
        lambda: operator_view.assignment().get(("leaving", 0)) == (target,),
        f"leaving-0 moved from broker {old} to {target}")
    assert moved
