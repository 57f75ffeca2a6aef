"""Topic day 2: Kafka's topic name rules at admission (schema, CEL) and in the operator; a
``replicas`` change carried out by reassignment (``plan_replication``, ``decide``, and the
reconcile against an in-memory API server and cluster: the reassignment sent, progress in
status, refusals as conditions and Events)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest

from strata.operator import crds, topic
from strata.operator.kafka import KafkaOperationError
from strata.operator.model import SpecError, TopicSpec, topic_name_problem
from strata.operator.throttle import TOPIC_CONFIGS, ThrottlePlan
from strata.operator.topic_sync import ObservedTopic, decide, plan_replication

from .test_operator_crds import admitted, validate


def topic_cr(name: str = "t", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "strata.dev/v1beta1", "kind": "Topic",
            "metadata": {"name": name, "namespace": "apps", "uid": uuid.uuid4().hex,
                         "generation": 2},
            "spec": {"broker": "events", "partitions": 3, **spec}}


# ------------------------------------------------------------------------------ names
@pytest.mark.parametrize("name", [".", "..", "a" * 250, "no spaces", "ü", ""])
def test_kafka_refuses_these_topic_names_and_so_does_the_operator(name: str) -> None:
    assert topic_name_problem(name) is not None
    with pytest.raises(SpecError, match="topic name"):
        TopicSpec.parse({"broker": "b", "topicName": name} if name else {"broker": "b"}, name)


@pytest.mark.parametrize("name", ["a", "a" * 249, "orders.v1_eu-west", "...", "_x"])
def test_legal_topic_names_pass(name: str) -> None:
    assert topic_name_problem(name) is None
    assert TopicSpec.parse({"broker": "b", "topicName": name}, "r").topic_name == name


def test_admission_refuses_illegal_topic_names() -> None:
    for bad in ("a" * 250, "x y", ""):
        with pytest.raises(jsonschema.ValidationError):
            validate(topic_cr(topicName=bad))
    assert admitted(crds.TOPIC_CRD, topic_cr(topicName=".."), None) == [
        "topicName cannot be '.' or '..'"]
    assert admitted(crds.TOPIC_CRD, topic_cr(topicName="."), None) == [
        "topicName cannot be '.' or '..'"]
    # The resource name stands in for topicName: it must be legal too (CRs may be named with
    # more than Kafka allows: 253 characters).
    long_name = topic_cr("a" * 251)
    assert len(admitted(crds.TOPIC_CRD, long_name, None)) == 1
    assert "set spec.topicName" in admitted(crds.TOPIC_CRD, long_name, None)[0]
    assert admitted(crds.TOPIC_CRD, topic_cr("a" * 251, topicName="short"), None) == []
    assert admitted(crds.TOPIC_CRD, topic_cr("orders.v1"), None) == []


def test_topic_printer_columns_show_what_kafka_has() -> None:
    columns = {c["name"]: c["jsonPath"]
               for c in crds.TOPIC_CRD["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Partitions"] == ".status.partitions"
    assert columns["Replicas"] == ".status.replicas"


# ------------------------------------------------------------------------------ plan
def test_shrinking_keeps_the_preferred_leader_and_growing_spreads_the_load() -> None:
    assignment = {0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1)}
    assert plan_replication(assignment, (0, 1, 2), 2) == {0: (0, 1), 1: (1, 2), 2: (2, 0)}
    assert plan_replication(assignment, (0, 1, 2), 3) == {}
    grown = plan_replication({0: (0,), 1: (1,), 2: (2,), 3: (0,)}, (0, 1, 2, 3), 2)
    assert grown == {0: (0, 3), 1: (1, 2), 2: (2, 1), 3: (0, 3)}
    counts = [sum(b in ids for ids in grown.values()) for b in range(4)]
    assert max(counts) - min(counts) <= 1


def test_more_replicas_than_brokers_is_refused() -> None:
    with pytest.raises(ValueError, match="INVALID_REPLICATION_FACTOR"):
        plan_replication({0: (0,)}, (0, 1), 3)


def test_a_plan_is_the_same_while_kafka_moves_the_replicas() -> None:
    """Mid-way Kafka reports old + new replicas: shrinking plans the same target again,
    growing sees the target reached."""
    before = {0: (0, 1, 2)}
    target = plan_replication(before, (0, 1, 2), 2)
    assert plan_replication(before, (0, 1, 2), 2) == target
    assert plan_replication({0: (0, 1, 2)}, (0, 1, 2), 3) == {}


def test_decide_reports_reassignment_or_refusal_only_when_replicas_is_set() -> None:
    observed = ObservedTopic(2, {}, {0: (0, 1), 1: (1, 0)}, (0, 1))
    assert decide(2, {}, observed).empty
    assert dict(decide(2, {}, observed, 1).reassign) == {0: (0,), 1: (1,)}
    refused = decide(2, {}, observed, 3)
    assert refused.empty and "larger than the 2 available brokers" in refused.replicas_problem


# ------------------------------------------------------------------------------ reconcile
class Api:
    """The API server calls ``topic.reconcile`` makes, in memory."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.events: list[dict[str, Any]] = []

    def list(self, kind: str, namespace: str | None,
             selector: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        assert kind == "Topic"
        return [self.body]

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert kind == "Broker"
        return {"metadata": {"name": name, "namespace": namespace},
                "spec": {"metadata": {"managed": True}}}

    def patch_status(self, kind: str, namespace: str, name: str,
                     status: dict[str, Any]) -> dict[str, Any]:
        self.body["status"] = status
        return self.body

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert obj["kind"] == "Event"
        self.events.append(obj)
        return obj


class Kafka:
    """A topic's assignment that follows AlterPartitionReassignments when ``moves`` is set."""

    def __init__(self, assignment: dict[int, tuple[int, ...]], brokers: tuple[int, ...],
                 moves: bool = True) -> None:
        self.assignment = assignment
        self.brokers = brokers
        self.moves = moves
        self.sent: list[dict[tuple[str, int], tuple[int, ...]]] = []
        self.config: dict[str, str] = {}
        self.rates: dict[int, str] = {}
        self.ongoing = False

    def describe_topic(self, name: str) -> ObservedTopic:
        return ObservedTopic(len(self.assignment), dict(self.config), dict(self.assignment),
                             self.brokers)

    def set_throttle(self, plan: ThrottlePlan) -> None:
        for configs in plan.topics.values():
            self.config.update(configs)
        self.rates.update(dict.fromkeys(plan.brokers, str(plan.rate)))

    def clear_throttle(self, plan: ThrottlePlan) -> None:
        for key in TOPIC_CONFIGS:
            self.config.pop(key, None)
        for broker in plan.brokers:
            self.rates.pop(broker, None)

    def ongoing_reassignments(self) -> set[tuple[str, int]]:
        return {("t", 0)} if self.ongoing else set()

    def reassign(self, plan: Mapping[tuple[str, int], tuple[int, ...]]) -> bool:
        self.sent.append(dict(plan))
        if self.moves:
            self.assignment.update({p: ids for (_, p), ids in plan.items()})
        return True

    def create_topic(self, name: str, partitions: int, replicas: int | None,
                     config: Mapping[str, str]) -> None:
        raise KafkaOperationError(f"CreateTopics {name!r}: Replication factor: {replicas} "
                                  "larger than available brokers: 1",
                                  "INVALID_REPLICATION_FACTOR")


def run(body: dict[str, Any], cluster: Any) -> tuple[Api, dict[str, Any]]:
    api = Api(body)
    status = topic.reconcile(body, api,  # type: ignore[arg-type]  # the calls it makes
                             cluster_factory=lambda bootstrap, config: cluster)
    body["status"] = status
    return api, status


def condition(status: Mapping[str, Any]) -> tuple[str, str, str]:
    ready = status["conditions"][0]
    return ready["status"], ready["reason"], ready["message"]


def test_a_replicas_decrease_is_reassigned_with_progress_then_ready() -> None:
    body = topic_cr(replicas=2)
    slow = Kafka({0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1)}, (0, 1, 2), moves=False)
    api, status = run(body, slow)
    assert slow.sent == [{("t", 0): (0, 1), ("t", 1): (1, 2), ("t", 2): (2, 0)}]
    assert condition(status)[:2] == ("False", "ReassignmentInProgress")
    assert "0 of 3 partitions done" in condition(status)[2]
    assert status["replicas"] == 3
    assert [e["reason"] for e in api.events] == ["ReassignmentInProgress"]
    assert api.events[0]["involvedObject"]["uid"] == body["metadata"]["uid"]
    # Kafka has moved them: the next pass is Ready and reports what Kafka has.
    slow.assignment.update({0: (0, 1), 1: (1, 2), 2: (2, 0)})
    api, status = run(body, slow)
    assert condition(status)[:2] == ("True", "TopicReady")
    assert (status["partitions"], status["replicas"], status["observedGeneration"]) == (3, 2, 2)
    assert [e["type"] for e in api.events] == ["Normal"]


def test_more_replicas_than_brokers_is_a_condition_and_a_warning_not_a_retry() -> None:
    cluster = Kafka({0: (0,)}, (0,))
    api, status = run(topic_cr(replicas=2, partitions=1), cluster)
    assert cluster.sent == []
    assert condition(status)[:2] == ("False", "InvalidReplicationFactor")
    assert "larger than the 1 available brokers" in condition(status)[2]
    assert [(e["type"], e["reason"]) for e in api.events] == [
        ("Warning", "InvalidReplicationFactor")]
    # The same again: no second Event.
    api, _ = run(api.body, cluster)
    assert api.events == []


def test_creating_with_too_many_replicas_is_refused_without_retry() -> None:
    class Missing(Kafka):
        def describe_topic(self, name: str) -> None:  # type: ignore[override]
            return None

    _, status = run(topic_cr(replicas=3), Missing({}, (0,)))
    assert condition(status)[:2] == ("False", "InvalidReplicationFactor")


def test_an_illegal_name_is_invalid_spec_with_a_warning_event() -> None:
    api, status = run(topic_cr(topicName=".."), Kafka({}, (0,)))
    assert condition(status)[:2] == ("False", "InvalidSpec")
    assert "topic name cannot be '..'" in condition(status)[2]
    assert api.events[0]["type"] == "Warning"


def test_a_pass_with_a_stale_body_does_not_post_the_same_event_again() -> None:
    body = topic_cr(replicas=2, partitions=1)
    stale = {**body, "metadata": dict(body["metadata"])}
    cluster = Kafka({0: (0,)}, (0,))
    first, _ = run(body, cluster)
    second, _ = run(stale, cluster)  # the timer still holds the body without status
    assert len(first.events) == 1 and second.events == []


def test_a_replicas_change_is_throttled_until_no_reassignment_is_in_progress() -> None:
    body = topic_cr(replicas=3, partitions=1)
    kafka = Kafka({0: (0, 1)}, (0, 1, 2), moves=False)
    _, status = run(body, kafka)
    assert kafka.config == {"leader.replication.throttled.replicas": "0:0,0:1",
                            "follower.replication.throttled.replicas": "0:2"}
    assert set(kafka.rates) == {0, 1, 2}
    # Kafka moving: its replica list is the union; the throttle is not planned again.
    kafka.assignment[0] = (0, 1, 2)
    kafka.ongoing = True
    _, status = run(body, kafka)
    assert kafka.config["follower.replication.throttled.replicas"] == "0:2"
    kafka.ongoing = False  # done: the next pass removes the throttles
    _, status = run(body, kafka)
    assert kafka.config == {} and kafka.rates == {}
    assert condition(status)[:2] == ("True", "TopicReady")
