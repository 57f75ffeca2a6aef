"""Controller: after a complete reconcile, the next wake-up reconciles only the partitions that
changed since (and those of transactions that lost a race); anything that may change every
partition's outcome — becoming active, a broker registered or gone, an unknown delta —
reconciles them all."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

import pytest

from strata.broker.cluster import controller as controller_module
from strata.broker.cluster import image as ci
from strata.broker.cluster.controller import Controller
from strata.broker.cluster.image_builder import ImageBuilder
from strata.metadata.store import Compare, MetadataStore, Op, Put, TxnResult

TOPIC_ID = uuid.UUID(int=0x7)
PARTITIONS = 6


class Store:
    """Answers the controller's transactions; a compare on a key in ``losing`` fails."""

    def __init__(self) -> None:
        self.written: list[list[str]] = []  # the partition keys of each transaction
        self.losing: set[str] = set()

    async def transaction(self, compares: Sequence[Compare], ops: Sequence[Op]) -> TxnResult:
        conflicts = tuple(c.key for c in compares if c.key in self.losing)
        self.written.append(sorted(op.key for op in ops
                                   if isinstance(op, Put) and op.key.startswith(ci.PARTITIONS)))
        return TxnResult(not conflicts, 100, conflicts)


def healthy(leader: int = 1) -> bytes:
    return ci.PartitionRegistration(TOPIC_ID, (1, 2, 3), (1, 2, 3), leader, 1, 9, 1).encode()


def offline(epoch: int = 2) -> bytes:
    """Leaderless with live ISR members: the controller elects one (a change to write)."""
    return ci.PartitionRegistration(TOPIC_ID, (1, 2, 3), (2, 3), -1, epoch, 0, epoch).encode()


class Harness:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = Store()
        self.controller = Controller(cast(MetadataStore, self.store), 1, lease_id=lambda: 5,
                                     unclean=lambda topic: False, rebalance_interval_s=None)
        self.builder = ImageBuilder()
        self.revision = 10
        self.reconciled: list[ci.PartitionRegistration] = []
        real = controller_module.reconcile_partition

        def counting(p: ci.PartitionRegistration, *args: Any, **kwargs: Any) -> Any:
            self.reconciled.append(p)
            return real(p, *args, **kwargs)

        monkeypatch.setattr(controller_module, "reconcile_partition", counting)

    async def start(self) -> None:
        """Elected (no controller in the image), then every partition reconciled once."""
        entries = {ci.broker_key(i): (ci.BrokerRegistration(i, "h", 9090 + i).encode(), 9)
                   for i in (1, 2, 3)}
        entries[ci.topic_key("t")] = (ci.TopicRegistration("t", TOPIC_ID, 3).encode(), 9)
        entries.update({ci.partition_key("t", i): (healthy(), 9) for i in range(PARTITIONS)})
        await self.controller.on_image(self.builder.load(entries, self.revision))
        await self.step()
        assert self.controller.active and len(self.reconciled) == PARTITIONS
        self.put(ci.CONTROLLER, ci.ControllerRegistration(1, 1).encode())
        self.put(ci.CONTROLLER_EPOCH, ci.encode_epoch(1))
        await self.publish()
        await self.step()
        self.reconciled.clear()
        self.store.written.clear()

    def put(self, key: str, value: bytes) -> None:
        self.revision += 1
        self.builder.put(key, value, self.revision)

    async def publish(self) -> None:
        await self.controller.on_image(self.builder.build(self.revision))

    async def step(self) -> None:
        await self.controller._step()


async def test_only_the_changed_partition_is_reconciled(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()
    h.put(ci.partition_key("t", 4), offline())
    await h.publish()
    await h.step()
    assert len(h.reconciled) == 1 and h.reconciled[0].leader == -1
    assert h.store.written == [[ci.partition_key("t", 4)]]


async def test_the_partitions_of_a_transaction_that_lost_a_race_are_reconciled_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()
    lost = [ci.partition_key("t", 1), ci.partition_key("t", 2)]
    for key in lost:
        h.put(key, offline())
    await h.publish()
    h.store.losing = {lost[0]}  # a leader's ISR change on t-1 got there first
    await h.step()
    assert h.store.written == [lost]
    h.store.losing = set()
    h.put(ci.partition_key("t", 5), healthy(leader=2))  # an unrelated change
    await h.publish()
    await h.step()
    # t-2 did not change in the store, and is elected all the same
    assert h.store.written == [lost, lost]


async def test_images_the_task_did_not_get_to_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()
    for index in (0, 3):
        h.put(ci.partition_key("t", index), offline())
        await h.publish()  # two images before the task wakes
    await h.step()
    assert len(h.reconciled) == 2
    assert h.store.written == [[ci.partition_key("t", 0), ci.partition_key("t", 3)]]


async def test_a_broker_change_or_an_unknown_delta_reconciles_every_partition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()
    h.put(ci.broker_key(3), ci.BrokerRegistration(3, "h", 9093).encode())  # 3 restarted
    await h.publish()
    await h.step()
    assert len(h.reconciled) == PARTITIONS
    h.reconciled.clear()
    h.put(ci.partition_key("t", 2), offline())
    relisted = h.builder.load(h.builder.entries, h.revision)  # history compacted: a listing
    assert relisted.changed_partitions is None
    await h.controller.on_image(relisted)
    await h.step()
    assert len(h.reconciled) == PARTITIONS
    assert h.store.written == [[ci.partition_key("t", 2)]]


async def test_a_reconcile_that_failed_is_followed_by_a_full_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()

    async def unavailable(compares: Any, ops: Any) -> TxnResult:
        raise OSError("connection reset")

    h.put(ci.partition_key("t", 1), offline())
    await h.publish()
    monkeypatch.setattr(h.store, "transaction", unavailable)
    with pytest.raises(OSError):
        await h.step()
    monkeypatch.undo()  # (the counting wrapper goes too: count the writes instead)
    h.put(ci.partition_key("t", 5), healthy(leader=2))
    await h.publish()
    await h.step()
    assert h.store.written == [[ci.partition_key("t", 1)]]


async def test_a_preferred_leader_election_looks_at_every_partition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(monkeypatch)
    await h.start()
    h.put(ci.partition_key("t", 3), healthy(leader=2))  # preferred (first replica) is 1
    await h.publish()
    await h.step()
    assert len(h.reconciled) == 1 and h.store.written == []
    h.controller._preferred_due = True  # the rebalance timer fired
    h.put(ci.partition_key("t", 0), healthy())
    await h.publish()
    await h.step()
    assert len(h.reconciled) == 1 + PARTITIONS
    assert h.store.written == [[ci.partition_key("t", 3)]]
