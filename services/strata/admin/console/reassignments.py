"""``/console/reassignments``: moving partitions between brokers (KIP-455) and preferred-leader
election (KIP-460), as ``kafka-reassign-partitions.sh`` and ``kafka-leader-election.sh``.

* ``GET /console/reassignments?topic=``: the moves in progress (ListPartitionReassignments:
  each partition's replicas, the ones being added and removed), each with *Cancel*; a form
  to move one partition (``topic``, ``partition``, target ``replicas`` ``1,2,3``, preferred
  leader first) and one to elect the preferred leaders of a topic (every partition, or one);
* ``POST /console/reassignments``: AlterPartitionReassignments with the target replicas; the
  move is asynchronous (the new replicas catch up, then the controller drops the old ones),
  the list shows it until it is done;
* ``POST /console/reassignments/cancel``: AlterPartitionReassignments with null replicas
  (Kafka's cancel: back to the original replicas); NO_REASSIGNMENT_IN_PROGRESS if it ended;
* ``POST /console/elections``: ElectLeaders PREFERRED; each partition's outcome is shown
  (ELECTION_NOT_NEEDED when the preferred replica leads already, as Kafka's tool reports).

The two reassignment APIs have no librdkafka call: they go through the admin service's
gateway as the REST API's client quotas do (``KafkaGateway.call``: ``bootstrap_request`` to
the first broker that answers, logged in as the service). A refusal (a broker id that is not
live: INVALID_REPLICA_ASSIGNMENT, an unknown partition...) is shown with Kafka's name and
message above the forms.

Authorization, Kafka's: the list needs Cluster Describe; moving, cancelling and electing need
Cluster Alter (the forms are shown only with it; a POST without it is 403).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Final

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from fastapi import APIRouter, Query
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import TOPIC_NAME_PATTERN
from strata.admin.problems import ProblemError
from strata.client.kafka_admin import topic_of
from strata.client.kafka_errors import kafka_error_name as client_error_name
from strata.client.partition_reassignments import alter_reassignment, list_reassignments
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

MAX_REPLICAS: Final = 32
MAX_TOPIC: Final = 249


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the brokers answered about one partition: None: done, else Kafka's error name."""

    topic: str
    partition: int
    error: str | None
    message: str = ""


def elect_preferred(gateway: KafkaGateway, topic: str, partition: int | None
                    ) -> list[Outcome]:
    """ElectLeaders PREFERRED for one partition of ``topic``, or every one of them."""
    kafka = gateway.kafka
    if partition is None:
        partitions = sorted(topic_of(kafka.metadata(), topic).partitions)
    else:
        partitions = [partition]
    # No timeout keywords: confluent-kafka 2.16.1's elect_leaders fails on any (SystemError
    # from its argument parsing); the client's socket.timeout.ms and ``result`` bound it.
    future = kafka.client.elect_leaders(ElectionType.PREFERRED,
                                        [TopicPartition(topic, p) for p in partitions])
    results: dict[Any, Any] = kafka.result(future, f"topic {topic!r}", "ElectLeaders")
    out = []
    for tp, outcome in results.items():
        error = (outcome.args[0] if isinstance(outcome, KafkaException) and outcome.args
                 else outcome)
        if isinstance(error, KafkaError):
            out.append(Outcome(tp.topic, tp.partition, client_error_name(error), error.str()))
        else:
            out.append(Outcome(tp.topic, tp.partition, None))
    return sorted(out, key=lambda o: (o.topic, o.partition))


def replica_list(text: str) -> list[int]:
    """``"1, 2,3"`` as broker ids; 422 when not a list of distinct whole numbers."""
    try:
        replicas = [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"replicas: {text!r} is not a list of broker ids like 1,2,3"
                           ) from None
    if not replicas or len(replicas) > MAX_REPLICAS or len(set(replicas)) != len(replicas):
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"replicas: 1 to {MAX_REPLICAS} distinct broker ids")
    return replicas


def _topic_partition(fields: dict[str, str], partition_required: bool
                     ) -> tuple[str, int | None]:
    topic = fields.get("topic", "").strip()
    if not topic or len(topic) > MAX_TOPIC or not re.fullmatch(TOPIC_NAME_PATTERN, topic):
        raise ProblemError(422, "VALIDATION_ERROR", "topic: a topic's name")
    partition = int_field(fields, "partition")
    if partition is None and partition_required:
        raise ProblemError(422, "VALIDATION_ERROR", "partition: required")
    if partition is not None and not 0 <= partition < 2**31:
        raise ProblemError(422, "VALIDATION_ERROR", "partition: 0 or more")
    return topic, partition


async def _render(console: ConsoleDep, topic: str = "", error: ProblemError | None = None,
                  notice: str = "", outcomes: list[Outcome] | None = None) -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    moving = await console.gateway.call(list_reassignments)
    may_alter = await console.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER)
    return console.render("reassignments.html",
                          status=error.status if error is not None else 200,
                          moving=moving, may_alter=may_alter, topic=topic, error=error,
                          notice=notice, outcomes=outcomes or [], section="overview")


@router.get("/reassignments")
async def reassignments(console: ConsoleDep,
                        topic: Annotated[str, Query(max_length=MAX_TOPIC)] = "") -> Response:
    return await _render(console, topic.strip())


async def _change(console: ConsoleDep, cancel: bool) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    topic = fields.get("topic", "").strip()
    try:
        topic, partition = _topic_partition(fields, True)
        assert partition is not None
        replicas = None if cancel else replica_list(fields.get("replicas", ""))
        await console.gateway.call(alter_reassignment, topic, partition, replicas)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, topic, error=exc)
    done = (f"reassignment of {topic}-{partition} cancelled" if cancel else
            f"{topic}-{partition} moving to brokers {','.join(map(str, replicas or []))}")
    return await _render(console, topic, notice=done)


@router.post("/reassignments")
async def move(console: ConsoleDep) -> Response:
    return await _change(console, cancel=False)


@router.post("/reassignments/cancel")
async def cancel(console: ConsoleDep) -> Response:
    return await _change(console, cancel=True)


@router.post("/elections")
async def elect(console: ConsoleDep) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER, ResourceType.CLUSTER)
    topic = fields.get("topic", "").strip()
    try:
        topic, partition = _topic_partition(fields, False)
        outcomes = await console.gateway.run(elect_preferred, console.gateway, topic,
                                             partition)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, topic, error=exc)
    elected = sum(1 for o in outcomes if o.error is None)
    return await _render(console, topic, outcomes=outcomes,
                         notice=f"preferred leader elected on {elected} of "
                                f"{len(outcomes)} partitions of {topic}")
