"""AlterPartitionReassignments v1: ``allow_replication_factor_change`` false keeps the count."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from strata.broker.cluster.image import PartitionRegistration
from strata.broker.cluster.partition_admin import PartitionAdminError
from strata.broker.handlers.alter_partition_reassignments import check_replication_factor_kept
from strata.protocol.error_codes import ErrorCode

TOPIC_ID = uuid.UUID("6d1c1a5e-0000-4000-8000-000000000002")


def cluster(partition: PartitionRegistration) -> Any:
    image = SimpleNamespace(topic_partitions=lambda topic: [(0, partition)] if topic == "t"
                            else [])
    return SimpleNamespace(image=image)


def test_the_same_count_on_other_brokers_is_allowed() -> None:
    check_replication_factor_kept(cluster(PartitionRegistration(TOPIC_ID, (1, 2), (1, 2), 1)),
                                  "t", 0, 2)


def test_another_count_is_invalid_replication_factor() -> None:
    with pytest.raises(PartitionAdminError) as raised:
        check_replication_factor_kept(
            cluster(PartitionRegistration(TOPIC_ID, (1, 2), (1, 2), 1)), "t", 0, 3)
    assert raised.value.error_code == ErrorCode.invalid_replication_factor
    assert "from 2 to 3" in raised.value.message


def test_replicas_being_added_do_not_count() -> None:
    moving = PartitionRegistration(TOPIC_ID, (1, 2, 3), (1, 2), 1, adding=(3,), removing=(2,))
    check_replication_factor_kept(cluster(moving), "t", 0, 2)


def test_an_unknown_partition_is_left_to_the_reassignment() -> None:
    check_replication_factor_kept(
        cluster(PartitionRegistration(TOPIC_ID, (1,), (1,), 1)), "other", 0, 3)
