"""Topic decisions (pure): ownership by age, and the changes a spec needs in Kafka."""

from __future__ import annotations

from strata.operator.topic_sync import (
    ObservedTopic,
    TopicRef,
    decide,
    owner_of,
    topic_ref,
)


def ref(name: str, created: str, topic: str = "orders", **kw: object) -> TopicRef:
    return TopicRef(namespace="ns", name=name, broker="b", topic_name=topic, created=created,
                    **kw)  # type: ignore[arg-type]


def test_the_older_topic_owns_the_name() -> None:
    old, new = ref("a", "2026-01-01T00:00:00Z"), ref("b", "2026-02-01T00:00:00Z")
    assert owner_of(new, [old]) == old
    assert owner_of(old, [new]) == old


def test_same_age_is_decided_by_name_and_others_do_not_compete() -> None:
    a, b = ref("a", "2026-01-01T00:00:00Z"), ref("b", "2026-01-01T00:00:00Z")
    assert owner_of(b, [a]) == a
    other_topic = ref("z", "2025-01-01T00:00:00Z", topic="payments")
    deleting = ref("y", "2025-01-01T00:00:00Z", deleting=True)
    assert owner_of(b, [other_topic, deleting]) == b


def test_a_missing_topic_is_created() -> None:
    assert decide(3, {}, None).create


def test_partitions_grow_and_config_is_set_and_unset() -> None:
    observed = ObservedTopic(2, {"retention.ms": "1", "segment.bytes": "100"})
    changes = decide(4, {"retention.ms": "2", "cleanup.policy": "compact"}, observed)
    assert not changes.create
    assert changes.partitions == 4
    assert changes.set_config == {"cleanup.policy": "compact", "retention.ms": "2"}
    assert changes.delete_config == ("segment.bytes",)
    assert not changes.problem


def test_in_sync_needs_nothing() -> None:
    changes = decide(3, {"retention.ms": "2"}, ObservedTopic(3, {"retention.ms": "2"}))
    assert changes.empty


def test_more_partitions_in_kafka_than_in_the_spec_is_reported_not_changed() -> None:
    changes = decide(2, {}, ObservedTopic(5, {}))
    assert changes.empty and "5 partitions" in changes.problem


def test_topic_ref_defaults_the_topic_name_to_the_resource_name() -> None:
    body = {"metadata": {"name": "orders", "namespace": "ns",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"broker": "b"}}
    assert topic_ref(body) == ref("orders", "2026-01-01T00:00:00Z")
    assert topic_ref({"metadata": {"name": "x"}, "spec": {}}) is None
