"""A real Strata broker whose TLS material is an operator-made Secret, started as a broker
pod's entrypoint would start it, and restarted whenever the stand-in StatefulSet controller
recreates the pod the operator rolled; plus a TLS client probe. Shared by the operator's
certificate and TLS-user tests.

The broker has a PLAINTEXT listener (the operator's, via ``STRATA_OPERATOR_BOOTSTRAP_SERVERS``)
and an SSL one (``ssl_port``) with ``<pod>.crt`` + ``<pod>.key`` as its PEM keystore and the
Secret's ``ca.crt`` as its truststore; ``extra`` adds settings (client auth, ACLs).
``running_tls_broker`` and ``running_operator_for`` are the two tests' module fixtures' bodies.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from strata.operator.kube import Kube

from ..broker_process import BrokerProcess, free_port
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator

POD = "events-0"
CERTS_SECRET = "events-broker-certs"


def secret_data(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    obj = kube.read("Secret", namespace, name) or {}
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


def tls_connects(port: int, ca_pem: str, timeout_s: float = 10.0, **extra: str) -> bool:
    """A Metadata request over TLS answered (True), or librdkafka's TLS error (False)."""
    errors: list[KafkaError] = []
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                          "security.protocol": "SSL", "ssl.ca.pem": ca_pem,
                          "error_cb": errors.append, "log_level": 0, **extra})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            client.list_topics(timeout=0.5)
            return True
        client.poll(0)
        if any(e.code() in (KafkaError._SSL, KafkaError._AUTHENTICATION) for e in errors):
            return False
    raise AssertionError(f"the TLS connection neither succeeded nor failed: {errors}")


class TlsBroker:
    """A real broker whose TLS material is the operator's Secret, as a pod would start."""

    def __init__(self, workdir: Path, extra: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.ssl_port = free_port()
        self.broker = BrokerProcess(workdir / "broker")
        plain = self.broker.port
        listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{self.ssl_port}"
        self.keystore = workdir / "keystore.pem"
        self.truststore = workdir / "ca.crt"
        self.broker.config.update({
            "listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.truststore),
            **(extra or {})})
        self.started_from: dict[str, str] = {}

    def start_from(self, data: dict[str, str]) -> None:
        """(Re)start with the Secret's data, as entrypoint.sh does with STRATA_TLS_PER_POD."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.keystore.write_text(data[f"{POD}.crt"] + data[f"{POD}.key"])
        self.truststore.write_text(data["ca.crt"])
        if self.broker.is_running():
            self.broker.stop()
        self.broker.start()
        self.started_from = data


class Pods:
    """The stand-in StatefulSet controller, plus the real broker restarted with each pod."""

    def __init__(self, kube: Kube, namespace: str, broker: TlsBroker) -> None:
        self.controller = StatefulSetController(kube, namespace)
        self.namespace = namespace
        self.kube = kube
        self.broker = broker
        self.restarts = 0
        self.on_restart: Callable[[dict[str, str]], None] = lambda data: None

    def sync(self) -> None:
        before = len(self.controller.created)
        self.controller.sync()
        if len(self.controller.created) > before:  # the pod (re)started: so does the broker
            data = secret_data(self.kube, self.namespace, CERTS_SECRET)
            self.broker.start_from(data)
            self.restarts += 1
            self.on_restart(data)


@contextlib.contextmanager
def running_tls_broker(directory: Path, extra: Mapping[str, str] | None = None
                       ) -> Iterator[TlsBroker]:
    """A ``TlsBroker`` in ``directory``, stopped (by PID) at the end if still running."""
    broker = TlsBroker(directory, extra)
    try:
        yield broker
    finally:
        if broker.broker.is_running():
            broker.broker.stop()


@contextlib.contextmanager
def running_operator_for(directory: Path, kube_mock: KubeMock, broker: TlsBroker
                         ) -> Iterator[OperatorProcess]:
    """The operator against ``kube_mock``, reaching ``broker`` on its PLAINTEXT listener."""
    with running_operator(directory, kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": broker.broker.bootstrap}
                          ) as started:
        yield started
