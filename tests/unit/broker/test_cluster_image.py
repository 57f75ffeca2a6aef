"""The cluster image: value encodings round-trip, and the image is built as the keys say."""

from __future__ import annotations

import uuid

import pytest

from strata.broker.cluster import image as ci


def test_values_round_trip() -> None:
    p = ci.PartitionRegistration(uuid.uuid4(), (1, 2, 0), (1, 2), 1, 4, 17, 9, (0,), (2,))
    assert ci.PartitionRegistration.decode(p.encode()) == p
    b = ci.BrokerRegistration(3, "h", 9094, "rack-a", 0)
    assert ci.BrokerRegistration.decode(b.encode(), 55) == ci.BrokerRegistration(
        3, "h", 9094, "rack-a", 55)
    t = ci.TopicRegistration("orders", uuid.uuid4(), 3, {"retention.ms": "1000"})
    assert ci.TopicRegistration.decode("orders", t.encode()) == t


def test_a_newer_format_is_refused() -> None:
    with pytest.raises(ci.ImageFormatError, match="format version 2"):
        ci.ControllerRegistration.decode(b'{"v": 2, "node_id": 1, "epoch": 1}')


def test_image_from_entries() -> None:
    topic_id = uuid.uuid4()
    t = ci.TopicRegistration("orders", topic_id, 2)
    p0 = ci.PartitionRegistration(topic_id, (0, 1), (0, 1), 0)
    p1 = ci.PartitionRegistration(topic_id, (1, 0), (1, 0), 1)
    stale = ci.PartitionRegistration(uuid.uuid4(), (0,), (0,), 0)  # an older topic's
    entries = {
        ci.broker_key(0): (ci.BrokerRegistration(0, "h", 1).encode(), 5),
        ci.CONTROLLER: (ci.ControllerRegistration(0, 3).encode(), 6),
        ci.CONTROLLER_EPOCH: (ci.encode_epoch(3), 6),
        ci.topic_key("orders"): (t.encode(), 7),
        ci.partition_key("orders", 0): (p0.encode(), 7),
        ci.partition_key("orders", 1): (p1.encode(), 8),
        ci.partition_key("gone", 0): (stale.encode(), 4),
        ci.broker_configs_key(""): (ci.encode_configs({"log.retention.ms": "5"}), 9),
        ci.broker_key(1): (b"not json", 10),
    }
    image = ci.build_image(entries, 10)
    assert list(image.brokers) == [0] and image.brokers[0].epoch == 5
    assert image.controller == ci.ControllerRegistration(0, 3)
    assert (image.controller_epoch, image.controller_epoch_version) == (3, 6)
    assert image.partition_count("orders") == 2
    assert image.partitions[("orders", 1)] == p1
    assert image.partition_versions[("orders", 1)] == 8
    assert ("gone", 0) not in image.partitions
    assert image.broker_configs[""] == {"log.retention.ms": "5"}


def test_rebuilding_decodes_only_what_changed_and_keeps_unchanged_mappings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ISR change of one partition among many: only its value is decoded again, and the
    topics, brokers and configs mappings are the previous image's objects (listeners skip
    re-applying configs on identity); the partition map is new and holds the change."""
    topic_id = uuid.uuid4()
    entries = {
        ci.broker_key(0): (ci.BrokerRegistration(0, "h", 1).encode(), 5),
        ci.topic_key("orders"): (ci.TopicRegistration("orders", topic_id, 50).encode(), 7),
        ci.broker_configs_key(""): (ci.encode_configs({"log.retention.ms": "5"}), 9),
        **{ci.partition_key("orders", i): (
            ci.PartitionRegistration(topic_id, (0, 1), (0, 1), 0).encode(), 8)
           for i in range(50)},
    }
    memo: ci.DecodeMemo = {}
    first = ci.build_image(entries, 10, None, memo)
    decodes: list[bytes] = []
    real = ci.PartitionRegistration.decode

    def counting(raw: bytes) -> ci.PartitionRegistration:
        decodes.append(raw)
        return real(raw)

    monkeypatch.setattr(ci.PartitionRegistration, "decode", staticmethod(counting))
    shrunk = ci.PartitionRegistration(topic_id, (0, 1), (0,), 0, partition_epoch=1)
    entries[ci.partition_key("orders", 7)] = (shrunk.encode(), 11)
    second = ci.build_image(entries, 11, first, memo)
    assert decodes == [shrunk.encode()]
    assert second.partitions[("orders", 7)] == shrunk
    assert second.partitions[("orders", 6)] is first.partitions[("orders", 6)]
    assert second.partitions is not first.partitions
    assert second.topics is first.topics and second.brokers is first.brokers
    assert second.broker_configs is first.broker_configs
    third = ci.build_image(entries, 12, second, memo)  # nothing changed: nothing decoded
    assert decodes == [shrunk.encode()] and third.partitions is second.partitions
    del entries[ci.partition_key("orders", 49)]  # a removed key leaves the memo too
    ci.build_image(entries, 13, third, memo)
    assert ci.partition_key("orders", 49) not in memo
