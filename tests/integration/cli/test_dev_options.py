"""``strata dev -o key=value --racks a,b``: every broker gets the setting, each its rack."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from .test_dev import STRATA, cleanup, free_ports, read_line_with

pytestmark = pytest.mark.integration


def test_dev_passes_settings_and_racks_to_the_brokers(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    port = free_ports(2)
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [str(STRATA), "dev", "--brokers", "2", "--data-dir", str(data_dir), "--kafka-port",
         str(port), "--admin-port", "-1", "--racks", "rack-a,rack-b",
         "-o", "log.retention.ms=3600000", "--override", "num.partitions=4"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        read_line_with(proc, "READY", deadline)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        cluster = admin.describe_cluster().result(timeout=30)
        assert sorted((n.id, n.rack) for n in cluster.nodes) == [(0, "rack-a"), (1, "rack-b")]
        for node_id in (0, 1):
            resource = ConfigResource(ResourceType.BROKER, str(node_id))
            configs = admin.describe_configs([resource])[resource].result(timeout=30)
            assert configs["log.retention.ms"].value == "3600000"
            assert configs["num.partitions"].value == "4"
            assert configs["broker.rack"].value == ("rack-a", "rack-b")[node_id]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
    finally:
        cleanup(proc, data_dir, port)


@pytest.mark.parametrize(("args", "message"), [
    (["-o", "retention"], "-o 'retention' is not key=value"),
    (["-o", "node.id=3"], "-o node.id: set by strata dev for each broker"),
    (["--racks", "a,,b"], "--racks 'a,,b'"),
])
def test_dev_refuses_bad_settings_before_starting(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    out = subprocess.run([str(STRATA), "dev", *args, "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert message in out.stderr
    assert not (tmp_path / "d").exists()
