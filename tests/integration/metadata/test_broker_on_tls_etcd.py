"""A broker whose ``metadata.store`` is an etcd that requires TLS client certificates
(``etcds://`` with ``metadata.store.ssl.*``): it registers, creates a topic and serves produce
and consume — with the cluster-test helpers (``ClusterProcesses``, ``read_all``); a TLS file
it cannot read ends its start with one line naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from ..broker_process import BrokerProcess, BrokerStartError
from ..cluster.cluster_processes import ClusterProcesses, read_all
from .etcd_process import running_etcd
from .etcd_tls_certs import make_tls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_broker_on_a_tls_etcd_serves_produce_and_consume(tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    (tmp_path / "etcd").mkdir()
    tls = make_tls(tmp_path / "tls")
    assert tls.client.cafile and tls.client.certfile and tls.client.keyfile
    with running_etcd(tmp_path / "etcd", tls.etcd) as etcd:
        cluster = ClusterProcesses(tmp_path, etcd.url, brokers=1, overrides={
            "metadata.store.ssl.cafile": tls.client.cafile,
            "metadata.store.ssl.certfile": tls.client.certfile,
            "metadata.store.ssl.keyfile": tls.client.keyfile,
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
        })
        cluster.start()
        try:
            cluster.create_topic("over-tls", partitions=2, replication_factor=1)
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
            for i in range(20):
                producer.produce("over-tls", value=b"%d" % i, partition=i % 2)
            assert producer.flush(30) == 0
            records = read_all(cluster.bootstrap, "over-tls", partitions=2, expected=20)
            assert sorted(int(v) for p in records.values() for _, v in p) == list(range(20))
        finally:
            cluster.stop()


def test_a_broker_with_an_unreadable_tls_file_exits_with_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "absent.key"
    broker = BrokerProcess(tmp_path / "broker", {
        "node.id": "0", "metadata.store": "etcds://127.0.0.1:1",
        "metadata.store.ssl.certfile": str(missing.with_suffix(".pem")),
        "metadata.store.ssl.keyfile": str(missing),
    })
    with pytest.raises(BrokerStartError) as caught:
        broker.start(timeout=30)
    log = str(caught.value)
    assert f"broker failed: metadata.store.ssl.keyfile={missing}: cannot read" in log
    assert "Traceback" not in log
