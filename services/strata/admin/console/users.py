"""``/console/users``: SCRAM users — list, create or update, delete (KIP-554, as
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-512=[...]'``).

* ``GET /console/users``: DescribeUserScramCredentials of every user: each user's mechanisms
  and iteration counts (never a password, salt or key: Kafka sends none);
* ``POST /console/users``: AlterUserScramCredentials with one upsertion: user, password,
  mechanism (SCRAM-SHA-256 or SCRAM-SHA-512) and iterations (Kafka's minimum 4096 to 16384);
  an existing credential of that mechanism is replaced. The salt is random (librdkafka's);
* ``POST /console/users/delete``: AlterUserScramCredentials with one deletion (user,
  mechanism); a credential that does not exist is Kafka's RESOURCE_NOT_FOUND, shown.

Authorization, Kafka's for these APIs: listing needs Cluster Describe, changes Cluster Alter
(the forms are shown only with it). The password travels in the form (use HTTPS) and is not
kept anywhere by the console.
"""

from __future__ import annotations

from typing import Final

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from fastapi import APIRouter
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.problems import ProblemError
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

MECHANISMS: Final = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
                     "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
DEFAULT_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
MAX_USER: Final = 255


def mechanism_name(mechanism: object) -> str:
    return str(getattr(mechanism, "name", mechanism)).replace("_", "-")


def list_users(gateway: KafkaGateway) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every SCRAM user with its (mechanism, iterations), sorted by name."""
    kafka = gateway.kafka
    future = kafka.client.describe_user_scram_credentials(request_timeout=kafka.timeout_s)
    assert not isinstance(future, dict)  # no users named: one future for all of them
    described = kafka.result(future, "the SCRAM users (DescribeUserScramCredentials)",
                             "DescribeUserScramCredentials") or {}
    return sorted((user, sorted((mechanism_name(info.mechanism), int(info.iterations))
                                for info in description.scram_credential_infos))
                  for user, description in described.items())


def _alter(gateway: KafkaGateway, alteration: UserScramCredentialAlteration, user: str
           ) -> None:
    kafka = gateway.kafka
    futures = kafka.client.alter_user_scram_credentials([alteration],
                                                        request_timeout=kafka.timeout_s)
    for future in futures.values():
        kafka.result(future, f"user {user!r}", "AlterUserScramCredentials")


def upsert_user(gateway: KafkaGateway, user: str, mechanism: str, iterations: int,
                password: str) -> None:
    _alter(gateway, UserScramCredentialUpsertion(
        user, ScramCredentialInfo(MECHANISMS[mechanism], iterations),
        password.encode("utf-8")), user)


def delete_user(gateway: KafkaGateway, user: str, mechanism: str) -> None:
    _alter(gateway, UserScramCredentialDeletion(user, MECHANISMS[mechanism]), user)


def _fields(fields: dict[str, str]) -> tuple[str, str]:
    user = fields.get("user", "").strip()
    mechanism = fields.get("mechanism", "")
    if not user or len(user) > MAX_USER:
        raise ProblemError(422, "VALIDATION_ERROR", f"user: 1 to {MAX_USER} characters")
    if mechanism not in MECHANISMS:
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"mechanism: one of {', '.join(MECHANISMS)}")
    return user, mechanism


async def _render(console: ConsoleDep, error: ProblemError | None = None,
                  notice: str = "") -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    users = await console.gateway.run(list_users, console.gateway)
    may_alter = await console.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER)
    return console.render("users.html", status=error.status if error is not None else 200,
                          users=users, may_alter=may_alter, error=error, notice=notice,
                          mechanisms=list(MECHANISMS), default_iterations=DEFAULT_ITERATIONS,
                          max_iterations=MAX_ITERATIONS, section="security", tab="users")


@router.get("/users")
async def users(console: ConsoleDep) -> Response:
    return await _render(console)


@router.post("/users")
async def upsert(console: ConsoleDep) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    try:
        user, mechanism = _fields(fields)
        iterations = int_field(fields, "iterations", DEFAULT_ITERATIONS)
        password = fields.get("password", "")
        if not password:
            raise ProblemError(422, "VALIDATION_ERROR", "password: required")
        await console.gateway.run(upsert_user, console.gateway, user, mechanism, iterations,
                                  password)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, error=exc)
    return await _render(console, notice=f"{mechanism} credential of {user} saved")


@router.post("/users/delete")
async def delete(console: ConsoleDep) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    try:
        user, mechanism = _fields(fields)
        await console.gateway.run(delete_user, console.gateway, user, mechanism)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, error=exc)
    return await _render(console, notice=f"{mechanism} credential of {user} deleted")
