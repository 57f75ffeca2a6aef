"""The real operator loop against the mock API server, for a secured ``Broker``: Secrets live in
the mock, the Kafka side is a real Strata broker whose ``SCRAM`` listener (SASL_PLAINTEXT,
SCRAM-SHA-512/256) is the Broker's inter-broker listener, with ACL authorization on and the
inter-broker user ``admin`` its super user.

The operator logs in as ``admin`` with the password it reads from the Secret and keeps
``spec.users`` in the cluster: users are created from their Secrets (checked by logging in as
them with confluent-kafka), a rotated password is applied, a missing Secret is reported, a user
removed from the list is deleted; and a rotated inter-broker password Secret marks the broker
pods outdated, which the operator rolls after logging in with the new password.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from strata.operator.builders import CONFIG_HASH_ANNOTATION
from strata.operator.kube import Kube

from ..broker_process import BrokerProcess, free_port
from ..security import logins
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]

NS = "secure"
STRATA = Path(sys.executable).parent / "strata"
LOGIN_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker with a SASL_PLAINTEXT listener ``SCRAM`` and ACLs; ``admin`` is a super user
    made with ``strata users create`` before it starts. Yields it and the SCRAM port."""
    workdir = tmp_path_factory.mktemp("scram-broker")
    scram_port = free_port()
    broker = BrokerProcess(workdir)
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SCRAM://127.0.0.1:{scram_port}"
    broker.config.update({
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SCRAM:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    done = subprocess.run([str(STRATA), "users", "create", "admin", "--password", "admin-1",
                           "--log-dir", str(broker.data_dir)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    broker.start()
    try:
        yield broker, scram_port
    finally:
        code = broker.stop()
    assert code == 0, f"broker did not shut down cleanly ({code})\n{broker.log_tail()}"


@pytest.fixture(scope="module")
def secured_operator(kube_mock: KubeMock, scram_broker: tuple[BrokerProcess, int],
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    _, scram_port = scram_broker
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": f"127.0.0.1:{scram_port}"}
                          ) as started:
        yield started


def secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def set_secret(kube: Kube, name: str, **data: str) -> None:
    kube.patch("Secret", NS, name, {"data": secret(name, **data)["data"]})


CAROL = {"name": "carol", "passwordSecret": {"name": "carol-password"}}
DAVE = {"name": "dave", "mechanism": "SCRAM-SHA-256",
        "passwordSecret": {"name": "app-passwords", "key": "dave"}}


def broker_cr(users: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
            "metadata": {"name": "events", "namespace": NS},
            "spec": {"replicas": 1, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                     "admin": {"enabled": False},
                     "listeners": {"plaintext": {"port": 9092},
                                   "scram": {"port": 9093,
                                             "authentication": {"type": "scram-sha-512"}}},
                     "interBroker": {"listener": "scram", "username": "admin",
                                     "passwordSecret": {"name": "events-admin"}},
                     "authorization": {"type": "simple"},
                     "users": users}}


def users_status(kube: Kube) -> dict[str, tuple[str, str, str | None]]:
    status = (kube.read("Broker", NS, "events") or {}).get("status") or {}
    return {u["name"]: (u["conditions"][0]["status"], u["conditions"][0]["reason"],
                        u.get("secretVersion")) for u in status.get("users") or ()}


def can_log_in(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    return logins.can_log_in({"bootstrap.servers": f"127.0.0.1:{port}",
                              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                              "sasl.username": user, "sasl.password": password},
                             LOGIN_TIMEOUT_S)


@pytest.fixture(scope="module")
def created(kube: Kube, secured_operator: OperatorProcess) -> StatefulSetController:
    kube.create(secret("events-admin", password="admin-1"))
    kube.create(secret("carol-password", password="carol-1"))
    kube.create(broker_cr([CAROL, DAVE]))
    wait_until(lambda: kube.read("StatefulSet", NS, "events"), 30, "the StatefulSet",
               secured_operator.log_tail)
    controller = StatefulSetController(kube, NS)
    controller.sync()
    return controller


def test_users_are_created_from_their_secrets(
        kube: Kube, created: StatefulSetController, secured_operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    wait_until(lambda: users_status(kube).get("carol", ("",))[0] == "True", 30,
               "carol created", secured_operator.log_tail)
    assert users_status(kube)["dave"][:2] == ("False", "SecretNotFound")
    assert can_log_in(port, "carol", "carol-1")
    kube.create(secret("app-passwords", dave="dave-1", other="unrelated"))
    wait_until(lambda: users_status(kube).get("dave", ("",))[0] == "True", 30,
               "dave created once his Secret exists", secured_operator.log_tail)
    assert can_log_in(port, "dave", "dave-1", "SCRAM-SHA-256")
    assert not can_log_in(port, "dave", "dave-1")  # no SCRAM-SHA-512 credential for dave


def test_a_rotated_password_is_applied(
        kube: Kube, created: StatefulSetController, secured_operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    wait_until(lambda: users_status(kube).get("carol", ("",))[0] == "True", 30,
               "carol created", secured_operator.log_tail)
    applied = users_status(kube)["carol"][2]
    set_secret(kube, "carol-password", password="carol-2")
    wait_until(lambda: users_status(kube)["carol"][2] != applied, 30,
               "the rotated password applied", secured_operator.log_tail)
    assert users_status(kube)["carol"][:2] == ("True", "CredentialApplied")
    assert can_log_in(port, "carol", "carol-2")
    assert not can_log_in(port, "carol", "carol-1")


def test_a_user_removed_from_the_list_is_deleted(
        kube: Kube, created: StatefulSetController, secured_operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    wait_until(lambda: users_status(kube).get("dave", ("",))[0] == "True", 30,
               "dave created", secured_operator.log_tail)
    kube.patch("Broker", NS, "events", {"spec": {"users": [CAROL]}})
    wait_until(lambda: list(users_status(kube)) == ["carol"], 30, "dave deleted",
               secured_operator.log_tail)
    assert not can_log_in(port, "dave", "dave-1", "SCRAM-SHA-256")


def test_a_rotated_inter_broker_password_rolls_the_brokers(
        kube: Kube, created: StatefulSetController, secured_operator: OperatorProcess,
        scram_broker: tuple[BrokerProcess, int]) -> None:
    _, port = scram_broker
    controller = created
    wait_until(lambda: any(c.get("type") == "Ready" and c.get("reason") == "BrokersReady"
                           for c in (kube.read("Broker", NS, "events") or {}).get(
                               "status", {}).get("conditions") or ()),
               30, "Ready", secured_operator.log_tail)

    def pod_hash() -> str:
        pod = kube.read("Pod", NS, "events-0")
        return "" if pod is None else pod["metadata"]["annotations"][CONFIG_HASH_ANNOTATION]

    old = pod_hash()
    assert old
    # The new password is set in Kafka first (a restarted broker's entrypoint does the same),
    # then in the Secret: the operator logs in with it and rolls the broker pods.
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                         "sasl.password": "admin-1", "log_level": 0})
    change = UserScramCredentialUpsertion(
        "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"admin-2")
    for future in admin.alter_user_scram_credentials([change]).values():
        future.result(timeout=20)
    set_secret(kube, "events-admin", password="admin-2")
    new = wait_until(lambda: (h := kube.read("StatefulSet", NS, "events")["spec"]["template"][
        "metadata"]["annotations"][CONFIG_HASH_ANNOTATION]) != old and h, 30,
        "a new config hash", secured_operator.log_tail)

    def rolled() -> bool:
        controller.sync()  # the StatefulSet controller recreates the deleted pod
        return pod_hash() == new

    wait_until(rolled, 30, "events-0 restarted with the rotated Secret",
               secured_operator.log_tail)
    assert "events-0" in controller.created[1:]  # deleted by the operator, then recreated
