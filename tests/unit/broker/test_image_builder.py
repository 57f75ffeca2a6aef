"""ImageBuilder: the image built from the previous one and the changed keys is the image
``build_image`` makes of the same entries — after every burst of random puts and deletes —
and it names exactly the partitions that changed."""

from __future__ import annotations

import json
import uuid
from unittest.mock import Mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.broker.cluster import image as ci
from strata.broker.cluster.image_builder import ImageBuilder
from strata.broker.quotas.quota_store import CLIENT_QUOTAS_PREFIX, encode_entry
from strata.security import acl
from strata.security.acl_store import ACLS_PREFIX, encode_binding

IDS = (uuid.UUID(int=1), uuid.UUID(int=2))
# Mappings a full build reuses from the previous image exactly when they came out equal.
SHARED = ("brokers", "topics", "partitions", "partition_versions", "topic_versions",
          "broker_configs", "acls")
KEYS = (
    *(ci.topic_key(t) for t in ("a", "b")),
    *(ci.partition_key(t, i) for t in ("a", "b", "c") for i in range(3)),
    ci.PARTITIONS + "a/01",  # names ("a", 1) too: a tie only the store's key order settles
    ci.PARTITIONS + "b/x",  # names no partition
    *(ci.broker_key(i) for i in range(3)),
    ci.CONTROLLER, ci.CONTROLLER_EPOCH,
    ci.shutting_down_key(1), ci.shutting_down_key(2), ci.SHUTTING_DOWN + "01",
    ci.SHUTTING_DOWN + "x",
    ci.broker_configs_key(""), ci.broker_configs_key("1"),
    ACLS_PREFIX + "k1", ACLS_PREFIX + "k2",
    CLIENT_QUOTAS_PREFIX + "q1", CLIENT_QUOTAS_PREFIX + "q2",
    ci.ROOT + "cluster_id",
)


def value_of(key: str, choice: int) -> bytes:
    """A value for ``key``: choice 0 is unreadable; equal choices give equal values."""
    if choice == 0:
        return (b"not json", b'{"v": 9}', b"[]")[len(key) % 3]
    if key.startswith(ci.PARTITIONS):
        leader = choice % 3
        return ci.PartitionRegistration(IDS[choice % 2], (0, 1, 2), (leader, 1), leader,
                                        choice).encode()
    if key.startswith(ci.TOPICS):
        configs = {"retention.ms": "1"} if choice == 3 else {}
        return ci.TopicRegistration(key[len(ci.TOPICS):], IDS[choice % 2], 3, configs).encode()
    if key.startswith(ci.BROKERS):
        return ci.BrokerRegistration(choice - 1, "h", 9000 + choice).encode()
    if key == ci.CONTROLLER:
        return ci.ControllerRegistration(choice, choice).encode()
    if key == ci.CONTROLLER_EPOCH:
        return ci.encode_epoch(choice)
    if key.startswith(ci.BROKER_CONFIGS):
        return ci.encode_configs({"log.retention.ms": str(choice % 2)})
    if key.startswith(ACLS_PREFIX):
        binding = acl.AclBinding(
            acl.ResourcePattern(acl.ResourceType.TOPIC, f"t{choice % 2}", acl.PatternType.LITERAL),
            acl.AccessControlEntry("User:a", "*", acl.AclOperation.READ,
                                   acl.AclPermissionType.ALLOW))
        return json.dumps(encode_binding(binding)).encode()
    if key.startswith(CLIENT_QUOTAS_PREFIX):
        entity = (("user", f"u{choice % 2}"),)
        return json.dumps(encode_entry(entity, {"producer_byte_rate": choice})).encode()
    return b"{}"


OP = st.tuples(st.sampled_from(KEYS), st.none() | st.integers(0, 3))  # None: delete
BURSTS = st.lists(st.lists(OP, min_size=1, max_size=5), max_size=30)


def check_step(builder: ImageBuilder, was: ci.ClusterImage, now: ci.ClusterImage) -> None:
    full = ci.build_image(builder.entries, now.revision, was)
    assert now == full
    for name in SHARED:
        mine, before = getattr(now, name), getattr(was, name)
        assert (mine is before) == (mine == before), name
    if any(k.startswith(ci.PARTITIONS) and k.endswith("/01") for k in builder.entries):
        assert now.changed_partitions is None  # a full build: no delta told
        return
    assert now.delta_from == was.revision
    differ = {tp for tp in {*was.partitions, *now.partitions}
              if was.partitions.get(tp) != now.partitions.get(tp)
              or was.partition_versions.get(tp) != now.partition_versions.get(tp)}
    assert now.changed_partitions == differ
    for tp, registration in now.partitions.items():
        if tp not in differ:
            assert registration is was.partitions[tp]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(initial=st.lists(OP, max_size=12), bursts=BURSTS)
def test_the_incremental_image_is_the_full_one(initial: list[tuple[str, int | None]],
                                               bursts: list[list[tuple[str, int | None]]]
                                               ) -> None:
    builder = ImageBuilder()
    revision = 1
    listed: dict[str, tuple[bytes, int]] = {}
    for key, choice in initial:
        revision += 1
        if choice is None:
            listed.pop(key, None)
        else:
            listed[key] = (value_of(key, choice), revision)
    was = builder.load(listed, revision)
    assert was == ci.build_image(listed, revision) and was.changed_partitions is None
    for burst in bursts:
        for key, choice in burst:
            revision += 1
            if choice is None:
                builder.delete(key)
            else:
                builder.put(key, value_of(key, choice), revision)
        now = builder.build(revision)
        check_step(builder, was, now)
        was = now


def _topic(name: str, topic_id: uuid.UUID) -> bytes:
    return ci.TopicRegistration(name, topic_id, 1).encode()


def _partition(topic_id: uuid.UUID, leader: int = 0) -> bytes:
    return ci.PartitionRegistration(topic_id, (0,), (0,), leader).encode()


def test_partitions_come_into_view_with_their_topic_and_leave_with_it() -> None:
    builder = ImageBuilder()
    builder.load({}, 1)
    builder.put(ci.partition_key("t", 0), _partition(IDS[0]), 2)  # before its topic
    early = builder.build(2)
    assert not early.partitions and early.changed_partitions == frozenset()
    builder.put(ci.topic_key("t"), _topic("t", IDS[0]), 3)
    shown = builder.build(3)
    assert shown.partitions[("t", 0)].topic_id == IDS[0]
    assert shown.changed_partitions == {("t", 0)} and shown.delta_from == 2
    builder.delete(ci.topic_key("t"))  # deleted: its partitions leave the image at once
    gone = builder.build(4)
    assert not gone.partitions and gone.changed_partitions == {("t", 0)}
    builder.put(ci.topic_key("t"), _topic("t", IDS[1]), 5)  # recreated under another id
    again = builder.build(5)
    assert not again.partitions  # the old incarnation's partition stays out of view
    builder.put(ci.partition_key("t", 0), _partition(IDS[1]), 6)
    assert builder.build(6).partitions[("t", 0)].topic_id == IDS[1]


def test_one_change_among_many_is_decoded_alone_and_the_rest_is_reused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    builder = ImageBuilder()
    entries = {ci.topic_key("t"): (_topic("t", IDS[0]), 2),
               ci.broker_key(0): (ci.BrokerRegistration(0, "h", 1).encode(), 2),
               **{ci.partition_key("t", i): (_partition(IDS[0]), 2) for i in range(1000)}}
    first = builder.load(entries, 2)
    decode = Mock(wraps=ci.PartitionRegistration.decode)
    monkeypatch.setattr(ci.PartitionRegistration, "decode", decode)
    builder.put(ci.partition_key("t", 7), _partition(IDS[0], leader=-1), 3)
    second = builder.build(3)
    assert decode.call_count == 1 and second.partitions[("t", 7)].leader == -1
    assert second.changed_partitions == {("t", 7)}
    assert second.topics is first.topics and second.brokers is first.brokers
    assert second.partitions[("t", 8)] is first.partitions[("t", 8)]
    third = builder.build(4)  # nothing changed
    assert third.partitions is second.partitions and third.changed_partitions == frozenset()
