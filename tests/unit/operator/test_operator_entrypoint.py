"""The broker pod's ``entrypoint.sh`` (in the ConfigMap), run by a real ``sh`` with a stand-in
``strata`` on PATH that prints its arguments: node.id from the pod ordinal, advertised
listener from the headless Service, broker.rack from the operator's pod annotation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from strata.operator import builders
from strata.operator.model import BrokerNames, BrokerSpec


def run(tmp_path: Path, rack: str | None,
        annotations: str | None) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "entrypoint.sh"
    config_map = builders.build_config_map(BrokerNames("events", "kafka"),
                                           BrokerSpec.parse({"metadata": {"managed": True}}))
    script.write_text(config_map["data"]["entrypoint.sh"], encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "strata"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n', encoding="utf-8")
    fake.chmod(0o755)
    podinfo = tmp_path / "podinfo"
    podinfo.mkdir()
    if annotations is not None:
        (podinfo / "annotations").write_text(annotations, encoding="utf-8")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOSTNAME": "events-2",
           "STRATA_CONFIG": "/etc/strata/server.properties",
           "STRATA_HEADLESS_SERVICE": "events-brokers.kafka.svc", "STRATA_KAFKA_PORT": "9092",
           "STRATA_PODINFO": str(podinfo), "STRATA_RACK_WAIT_SECONDS": "0"}
    if rack is not None:
        env["STRATA_RACK_ENABLED"] = rack
    return subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                          timeout=30, check=False)


def test_node_id_and_advertised_listener_come_from_the_pod(tmp_path: Path) -> None:
    done = run(tmp_path, None, None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "broker", "--config", "/etc/strata/server.properties", "-o", "node.id=2", "-o",
        "advertised.listeners=PLAINTEXT://events-2.events-brokers.kafka.svc:9092"]


def test_rack_comes_from_the_annotation_the_operator_sets(tmp_path: Path) -> None:
    done = run(tmp_path, "1", 'prometheus.io/port="9404"\nstrata.dev/rack="zone-b"\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["-o", "broker.rack=zone-b"]


def test_without_a_rack_annotation_the_broker_does_not_start(tmp_path: Path) -> None:
    done = run(tmp_path, "1", 'other="x"\n')
    assert done.returncode == 1
    assert "no strata.dev/rack annotation" in done.stderr
    assert done.stdout == ""
