"""Rebalance time, classic protocol vs KIP-848: ``make bench-rebalance``.

One broker (``bench/local_broker.py``) with the loopback timings of the group tests (classic
and consumer-protocol heartbeats every ``--heartbeat-ms``, 500 ms by default: the classic
client's ``heartbeat.interval.ms`` and the broker's ``group.consumer.heartbeat.interval.ms``
(and its minimum), 6 s sessions, no initial rebalance delay). For
each group size (``--members``, 10 and 50) over one topic of ``--partitions`` (100), and each
protocol:

* ``classic-eager``: confluent-kafka, ``group.protocol=classic``, the ``range`` assignor
  (every member gives up everything at each rebalance);
* ``classic-cooperative``: the same with ``cooperative-sticky`` (two rounds, only moved
  partitions revoked);
* ``consumer``: ``group.protocol=consumer`` (KIP-848; the broker's ``uniform`` assignor);

each measurement's group (a group of its own, from the end of one shared topic) is formed and
left to settle (every partition held once, loads within one), then:

* ``join``: one more member starts;
* ``leave``: one member closes (LeaveGroup / heartbeat -1);
* ``rolling-restart`` (groups of at most ``--rolling-max-members``): each member in turn
  closes and a new one starts in its place, the next once the new one holds partitions.

Measured from the event: the time until the assignment is stable again
(``rebalance_figures.is_stable``, from each member's ``assignment()``, read as ``consume``
returns, before the batch's work), the time until every partition is *consumed* again
(issue 20's figure, ``rebalance_figures.consumed_again``: each partition in a batch of the
member holding it at the end, after its assign callback gave it the partition), and each
member's
records-processing pause — the longest stretch without a processed record in the window from
the event to one second after stability — while a producer writes ``--rate`` (2,000)
records/s spread over every partition and each member spends ``--work-ms`` (100) on every
batch it gets, as an application does (a member serves a rebalance only between batches)
(members present throughout; for the rolling restart, the longest
per-partition gap instead). Members are threads of this process, one confluent-kafka consumer
each (librdkafka does the work on its own threads). Printed: one perf-test-like line per
measurement, then a table with the speed-up over classic-eager. Nothing asserted: timings on
a shared machine move.

Run: ``.venv/bin/python -m bench.rebalance [--members 10 50] [--partitions 100]
[--protocols classic-eager classic-cooperative consumer] [--events join leave
rolling-restart] [--rate 2000] [--work-ms 100] [--heartbeat-ms 500]``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Final

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .local_broker import local_broker
from .rebalance_figures import (
    TP,
    Measurement,
    consumed_again,
    figure_line,
    is_stable,
    longest_pause,
    percentile,
    speedup,
)

PROTOCOLS: Final[dict[str, dict[str, str]]] = {
    "classic-eager": {"group.protocol": "classic", "partition.assignment.strategy": "range",
                      "session.timeout.ms": "6000"},
    "classic-cooperative": {"group.protocol": "classic",
                            "partition.assignment.strategy": "cooperative-sticky",
                            "session.timeout.ms": "6000"},
    "consumer": {"group.protocol": "consumer"},
}
HEARTBEAT_MS: Final = 500
"""Both protocols' heartbeat interval by default (Kafka's defaults are 3 s for the classic
client and 5 s for ``group.consumer.heartbeat.interval.ms``: too slow for loopback)."""
EVENTS: Final = ("join", "leave", "rolling-restart")
BROKER_CONFIG: Final = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
}


def broker_config(heartbeat_ms: int) -> dict[str, str]:
    """``BROKER_CONFIG`` with the consumer groups' heartbeat interval (and its minimum)."""
    return {**BROKER_CONFIG, "group.consumer.min.heartbeat.interval.ms": str(heartbeat_ms),
            "group.consumer.heartbeat.interval.ms": str(heartbeat_ms)}
STABLE_TIMEOUT_S: Final = 180.0
AFTER_STABLE_S: Final = 1.0
POLL_S: Final = 0.02


class Member(threading.Thread):
    """One consumer polling in a loop; ``assigned`` and the batch times as it goes."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 protocol: str, work_ms: int, heartbeat_ms: int = HEARTBEAT_MS) -> None:
        super().__init__(name=f"member-{name}", daemon=True)
        self.member = name
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                       "auto.offset.reset": "latest", "enable.auto.commit": True,
                       "fetch.wait.max.ms": 100, "max.poll.interval.ms": 20000,
                       **PROTOCOLS[protocol]}
        if self.config["group.protocol"] == "classic":
            self.config["heartbeat.interval.ms"] = str(heartbeat_ms)
        self.topic = topic
        self.work_s = work_ms / 1000
        self.assigned: frozenset[TP] = frozenset()
        self.acquired: dict[TP, float] = {}  # when the assign callback last gave a partition
        self.batches: list[tuple[float, frozenset[TP]]] = []
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def run(self) -> None:
        consumer = Consumer(self.config)

        def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            now = time.monotonic()
            self.acquired.update({(tp.topic, tp.partition): now for tp in partitions})

        consumer.subscribe([self.topic], on_assign=on_assign)
        try:
            while not self.stopping.is_set():
                messages = consumer.consume(500, 0.05)
                self.assigned = frozenset((tp.topic, tp.partition)
                                          for tp in consumer.assignment())
                records = [m for m in messages if not m.error()]
                if records:
                    self.batches.append((time.monotonic(), frozenset(
                        (m.topic() or "", m.partition() or 0) for m in records)))
                    if self.work_s:
                        time.sleep(self.work_s)  # the application's work on the batch
        finally:
            consumer.close()
            self.assigned = frozenset()
            self.closed.set()

    def has_partitions(self) -> bool:
        return bool(self.assigned)

    def stop(self) -> None:
        self.stopping.set()
        self.closed.wait(60)

    def batch_times(self) -> list[float]:
        return [t for t, _ in self.batches]


class Load(threading.Thread):
    """A producer writing ``rate`` records/s round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        super().__init__(name="load", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.stopping = threading.Event()
        self.longest_gap_s = 0.0

    def run(self) -> None:
        sent, started = 0, time.monotonic()
        last = started
        while not self.stopping.is_set():
            now = time.monotonic()
            self.longest_gap_s = max(self.longest_gap_s, now - last)
            last = now
            due = int((now - started) * self.rate)
            while sent < due:
                with contextlib.suppress(BufferError):
                    self.producer.produce(self.topic, b"x" * 100, partition=sent % self.partitions)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(10)


class Group:
    """The members of one measurement."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, protocol: str,
                 work_ms: int, heartbeat_ms: int = HEARTBEAT_MS) -> None:
        self.bootstrap, self.topic, self.protocol = bootstrap, topic, protocol
        self.work_ms, self.heartbeat_ms = work_ms, heartbeat_ms
        self.group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
        self.all_partitions = [(topic, p) for p in range(partitions)]
        self.members: dict[str, Member] = {}
        self._count = 0

    def start(self) -> Member:
        self._count += 1
        member = Member(f"m{self._count}", self.bootstrap, self.group, self.topic,
                        self.protocol, self.work_ms, self.heartbeat_ms)
        self.members[member.member] = member
        member.start()
        return member

    def stop(self, name: str) -> Member:
        member = self.members.pop(name)
        member.stop()
        return member

    def stable(self) -> bool:
        return is_stable({n: m.assigned for n, m in self.members.items()}, self.all_partitions)

    def wait(self, condition: Callable[[], bool], what: str) -> float | None:
        """Seconds until ``condition`` holds (None: not within ``STABLE_TIMEOUT_S``)."""
        started = time.monotonic()
        while time.monotonic() - started < STABLE_TIMEOUT_S:
            if condition():
                return time.monotonic() - started
            time.sleep(POLL_S)
        print(f"  (not {what} within {STABLE_TIMEOUT_S:.0f} s)", flush=True)
        return None

    def consumed_s(self, started: float) -> float | None:
        """``consumed_again`` from ``started``, by the members' assignments now."""
        owners = {tp: n for n, m in self.members.items() for tp in m.assigned}
        acquired = {(n, tp): t for n, m in self.members.items()
                    for tp, t in list(m.acquired.items())}
        return consumed_again(owners, acquired,
                              {n: list(m.batches) for n, m in self.members.items()}, started)

    def close(self) -> None:
        for member in self.members.values():
            member.stopping.set()
        for member in self.members.values():
            member.closed.wait(60)


def measure(bootstrap: str, topic: str, protocol: str, members: int, partitions: int,
            event: str, work_ms: int, heartbeat_ms: int = HEARTBEAT_MS) -> Measurement:
    """One measurement, by a group of its own on the shared topic (from its end)."""
    group = Group(bootstrap, topic, partitions, protocol, work_ms, heartbeat_ms)
    try:
        for _ in range(members):
            group.start()
        if group.wait(group.stable, "stable before the event") is None:
            return Measurement(protocol, event, members, partitions, None, ())
        time.sleep(AFTER_STABLE_S)  # a baseline of processing before the event
        present = dict(group.members)
        started = time.monotonic()
        if event == "join":
            group.start()
        elif event == "leave":
            present.pop(next(iter(present)))
            group.stop(next(iter(group.members)))
        else:
            for name in list(present):
                group.stop(name)
                group.wait(group.start().has_partitions, "the new member assigned")
            present = {}
        stable_after = group.wait(group.stable, "stable after the event")
        if stable_after is None:
            return Measurement(protocol, event, members, partitions, None, ())
        stable_s = time.monotonic() - started  # the wait returned as it became stable
        time.sleep(AFTER_STABLE_S)
        end = time.monotonic()
        group.wait(lambda: group.consumed_s(started) is not None, "consumed again")
        consumed_s = group.consumed_s(started)
        if present:
            pauses = tuple(longest_pause(m.batch_times(), started, end)
                           for m in present.values())
        else:  # rolling restart: the longest gap of each partition, whoever consumed it
            everyone = [b for m in group.members.values() for b in m.batches]
            pauses = tuple(longest_pause([t for t, tps in everyone if tp in tps], started, end)
                           for tp in group.all_partitions)
        return Measurement(protocol, event, members, partitions, stable_s, pauses, consumed_s)
    finally:
        group.close()


@contextlib.contextmanager
def broker(heartbeat_ms: int = HEARTBEAT_MS) -> Iterator[str]:
    with local_broker(broker_config(heartbeat_ms)) as bootstrap:
        yield bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--protocols", nargs="+", choices=list(PROTOCOLS),
                        default=list(PROTOCOLS))
    parser.add_argument("--events", nargs="+", choices=EVENTS, default=list(EVENTS))
    parser.add_argument("--rolling-max-members", type=int, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced meanwhile")
    parser.add_argument("--work-ms", type=int, default=100,
                        help="each member's processing time per batch")
    parser.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_MS,
                        help="both protocols' heartbeat interval")
    args = parser.parse_args(argv)
    results: list[Measurement] = []
    with broker(args.heartbeat_ms) as bootstrap:
        topic = "bench-rebalance"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        load = Load(bootstrap, topic, args.partitions, args.rate)
        load.start()
        print(f"# broker at {bootstrap}; heartbeats {args.heartbeat_ms} ms, sessions 6 s; "
              f"{args.rate} records/s "
              f"over {args.partitions} partitions; {args.work_ms} ms of work per batch",
              flush=True)
        try:
            for members in args.members:
                for event in args.events:
                    if event == "rolling-restart" and members > args.rolling_max_members:
                        continue
                    for protocol in args.protocols:
                        result = measure(bootstrap, topic, protocol, members, args.partitions,
                                         event, args.work_ms, args.heartbeat_ms)
                        results.append(result)
                        print(figure_line(result), flush=True)
        finally:
            load.stopping.set()
            load.join(30)
        print(f"# producer: longest gap between sends {load.longest_gap_s:.2f} s "
              "(a stall there pauses every member alike)", flush=True)
    print()
    print(table(results))
    return 0


def table(results: list[Measurement]) -> str:
    """A Markdown table: time to stable and to consumed again, pauses, and the speed-ups
    over classic-eager (stable / consumed)."""
    base = {(r.members, r.event): r for r in results if r.protocol == "classic-eager"}
    lines = ["| members | event | protocol | stable | consumed | max pause | median pause "
             "| vs eager (stable / consumed) |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        stable = "not stable" if r.stable_s is None else f"{r.stable_s:.2f} s"
        consumed = "-" if r.consumed_s is None else f"{r.consumed_s:.2f} s"
        eager = base.get((r.members, r.event))
        lines.append(f"| {r.members} | {r.event} | {r.protocol} | {stable} | {consumed} | "
                     f"{max(r.pauses_s, default=0.0):.2f} s | {percentile(r.pauses_s, 50):.2f} s"
                     f" | {speedup(eager, r)} / {speedup(eager, r, 'consumed_s')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
