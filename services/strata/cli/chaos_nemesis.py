"""The fault campaign's nemesis: which faults, in which order, and how each is played.

A fault is *inject → hold → heal*: the nemesis never leaves a broker stopped, paused or cut
off after its fault; it then waits (bounded) until every broker is registered and every
partition led again before the next gap. Kinds (``FaultKind``):

``kill-leader`` kill -9 the leader of a random partition; ``kill-random`` kill -9 a random
broker; ``kill-controller`` kill -9 the controller; ``kill-two`` kill -9 two random brokers;
``kill-all`` kill -9 every broker; ``pause`` SIGSTOP a random broker for the pause hold, then
SIGCONT; ``term-all`` SIGTERM every broker at once (graceful). After ``kill-two``, ``kill-all``
and ``term-all`` the brokers restart all at once or, half of the time, one at a time in a random
order (the first ones back decide leadership and ISRs without the others);
``damage-kill`` kill -9 a random broker, damage its unflushed segment tail (torn write or a
flipped byte, ``chaos_segments.damage_tail``), restart; ``damage-term`` SIGTERM a random broker,
cut whole batches off a segment's end, restart (both only on a partition whose ISR, just before
the stop, holds another broker: the acknowledged copy Kafka promises to keep);
``partition-leader`` (network namespaces only) cut the leader of a random partition off from
the other brokers, the metadata store and the clients, then heal; ``partition-random`` the
same for a random broker.

Reproducibility: ``plan_faults(seed, ...)`` is pure — the kinds, holds, gaps and each fault's
own RNG seed come from ``random.Random(seed)``; the victims are drawn from that per-fault RNG
against the cluster as it is at the time (who leads is the cluster's doing, not ours).
Only the campaign thread drives a ``Nemesis``.
"""

from __future__ import annotations

import enum
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from strata.cli.chaos_cluster import ChaosBroker, ChaosCluster
from strata.cli.chaos_segments import damage_tail

HEAL_TIMEOUT_S = 90.0


class FaultKind(enum.StrEnum):
    KILL_LEADER = "kill-leader"
    KILL_RANDOM = "kill-random"
    KILL_CONTROLLER = "kill-controller"
    KILL_TWO = "kill-two"
    KILL_ALL = "kill-all"
    PAUSE = "pause"
    TERM_ALL = "term-all"
    DAMAGE_KILL = "damage-kill"
    DAMAGE_TERM = "damage-term"
    PARTITION_LEADER = "partition-leader"
    PARTITION_RANDOM = "partition-random"


NETWORK_KINDS = frozenset({FaultKind.PARTITION_LEADER, FaultKind.PARTITION_RANDOM})
PROCESS_KINDS = tuple(k for k in FaultKind if k not in NETWORK_KINDS)


@dataclass(frozen=True)
class Timing:
    """Seconds: the gap before each fault, how long a stopped broker stays down, how long a
    SIGSTOP and a network cut are held (a cut longer than the broker session, so leadership
    moves)."""

    gap: tuple[float, float] = (5.0, 15.0)
    hold: tuple[float, float] = (1.0, 5.0)
    pause: tuple[float, float] = (5.0, 30.0)
    cut: tuple[float, float] = (10.0, 30.0)  # the broker session is 9 s (chaos_cluster)


QUICK_TIMING = Timing(gap=(0.2, 1.0), hold=(0.3, 1.5), pause=(3.0, 6.0), cut=(9.5, 12.0))


@dataclass(frozen=True)
class PlannedFault:
    index: int
    kind: FaultKind
    gap_s: float
    hold_s: float
    seed: int


def plan_faults(seed: int, count: int, kinds: Sequence[FaultKind],
                timing: Timing = Timing()) -> list[PlannedFault]:
    """The campaign's faults, a pure function of its arguments."""
    if not kinds:
        raise ValueError("no fault kinds to plan")
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = rng.choice(list(kinds))
        hold = rng.uniform(*(timing.pause if kind == FaultKind.PAUSE
                             else timing.cut if kind in NETWORK_KINDS else timing.hold))
        out.append(PlannedFault(i, kind, rng.uniform(*timing.gap), hold,
                                rng.randrange(1 << 62)))
    return out


@dataclass
class FaultRecord:
    """What one fault did: its victims, notes (damage done, anomalies) and the time to heal."""

    index: int
    kind: FaultKind
    victims: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started: float = 0.0
    healed_s: float | None = None  # from heal to healthy; None: not healthy in time
    forced: list[int] = field(default_factory=list)  # SIGTERMed brokers that needed SIGKILL


class NetworkCuts(Protocol):
    """Cuts and heals a broker's links (``chaos_netns.Network``)."""

    def isolate(self, node_id: int) -> None: ...

    def heal(self) -> None: ...


class Nemesis:
    """Plays planned faults against one ``ChaosCluster``."""

    def __init__(self, cluster: ChaosCluster, topic: str, partitions: int,
                 network: NetworkCuts | None = None,
                 log: Callable[[str], None] = lambda line: None) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.network = network
        self.log = log

    # ------------------------------------------------------------------- victims
    def _ids(self) -> list[int]:
        return sorted(self.cluster.brokers)

    def _leader_of(self, rng: random.Random, record: FaultRecord) -> int:
        partition = rng.randrange(self.partitions)
        view = self.cluster.view(self.topic)
        state = view.partitions.get(partition) if view else None
        if state is None or state.leader not in self.cluster.brokers:
            record.notes.append(f"no leader known for partition {partition}: random broker")
            return rng.choice(self._ids())
        record.notes.append(f"partition {partition}")
        return state.leader

    def _controller(self, rng: random.Random, record: FaultRecord) -> int:
        view = self.cluster.view(None)
        if view is None or view.controller not in self.cluster.brokers:
            record.notes.append("no controller known: random broker")
            return rng.choice(self._ids())
        return view.controller

    # ------------------------------------------------------------------- play
    def run(self, fault: PlannedFault) -> FaultRecord:
        """Inject, hold, heal; then wait until the cluster is healthy (bounded)."""
        rng = random.Random(fault.seed)
        record = FaultRecord(fault.index, fault.kind, started=time.time())
        brokers = self.cluster.brokers
        kind = fault.kind
        if kind in (FaultKind.KILL_LEADER, FaultKind.KILL_RANDOM, FaultKind.KILL_CONTROLLER):
            victim = {FaultKind.KILL_LEADER: lambda: self._leader_of(rng, record),
                      FaultKind.KILL_CONTROLLER: lambda: self._controller(rng, record),
                      FaultKind.KILL_RANDOM: lambda: rng.choice(self._ids())}[kind]()
            record.victims = [victim]
            brokers[victim].kill()
            time.sleep(fault.hold_s)
            self._restart([brokers[victim]])
        elif kind in (FaultKind.KILL_TWO, FaultKind.KILL_ALL):
            ids = rng.sample(self._ids(), 2) if kind == FaultKind.KILL_TWO else self._ids()
            record.victims = sorted(ids)
            for i in ids:
                brokers[i].signal(signal.SIGKILL)
            for i in ids:
                brokers[i].kill()  # reap
            time.sleep(fault.hold_s)
            self._restart([brokers[i] for i in ids], rng, record)
        elif kind == FaultKind.PAUSE:
            victim = rng.choice(self._ids())
            record.victims = [victim]
            brokers[victim].signal(signal.SIGSTOP)
            time.sleep(fault.hold_s)
            brokers[victim].signal(signal.SIGCONT)
        elif kind == FaultKind.TERM_ALL:
            record.victims = self._ids()
            codes = self.cluster.stop_all()
            unclean = {i: c for i, c in codes.items() if c != 0}
            if unclean:
                record.notes.append(f"SIGTERM exit codes not 0: {unclean}")
                record.forced = sorted(i for i, c in unclean.items() if c == -signal.SIGKILL)
            time.sleep(fault.hold_s)
            self._restart(list(brokers.values()), rng, record)
        elif kind in (FaultKind.DAMAGE_KILL, FaultKind.DAMAGE_TERM):
            victim = rng.choice(self._ids())
            record.victims = [victim]
            broker = brokers[victim]
            clean = kind == FaultKind.DAMAGE_TERM
            # Only partitions with another in-sync replica may lose this replica's tail.
            view = self.cluster.view(self.topic)
            eligible = {p for p, state in view.partitions.items()
                        if set(state.isr) - {victim}} if view is not None else set()
            if clean:
                code = broker.terminate()
                if code != 0:
                    record.notes.append(f"SIGTERM exit code {code}")
                    if code == -signal.SIGKILL:
                        record.forced = [victim]
            else:
                broker.kill()
            mode = rng.choice(["truncate", "corrupt"])
            record.notes.append(damage_tail(Path(broker.config["log.dirs"]), self.topic, rng,
                                            clean=clean, mode=mode, eligible=eligible))
            time.sleep(fault.hold_s)
            self._restart([broker])
        elif kind in NETWORK_KINDS:
            if self.network is None:
                raise RuntimeError(f"{kind} needs network namespaces (none were set up)")
            victim = (self._leader_of(rng, record) if kind == FaultKind.PARTITION_LEADER
                      else rng.choice(self._ids()))
            record.victims = [victim]
            self.network.isolate(victim)
            time.sleep(fault.hold_s)
            self.network.heal()
        heal_started = time.monotonic()
        if self.cluster.wait_for(lambda: self.cluster.healthy(self.topic, self.partitions),
                                 "healthy", HEAL_TIMEOUT_S):
            record.healed_s = time.monotonic() - heal_started
        else:
            record.notes.append(f"not healthy {HEAL_TIMEOUT_S:.0f} s after healing")
        healed = "never" if record.healed_s is None else f"{record.healed_s:.1f} s"
        self.log(f"fault {fault.index} {kind} victims {record.victims} healthy after {healed}"
                 + (f" ({'; '.join(record.notes)})" if record.notes else ""))
        return record

    def _restart(self, victims: Sequence[ChaosBroker], rng: random.Random | None = None,
                 record: FaultRecord | None = None) -> None:
        """Start the stopped ``victims``: all at once, or (given an RNG, half of the time) one
        at a time in a random order, each ready before the next starts, so the first ones back
        run for a while without the others (leadership and ISR decisions with part of the
        cluster)."""
        stopped = [b for b in victims if not b.is_running()]
        if rng is not None and len(stopped) > 1 and rng.random() < 0.5:
            rng.shuffle(stopped)
            if record is not None:
                record.notes.append("restarted one at a time: "
                                    + ", ".join(str(b.node_id) for b in stopped))
            for broker in stopped:
                broker.spawn()
                broker.wait_ready()
            return
        for broker in stopped:
            broker.spawn()
        for broker in stopped:
            broker.wait_ready()
