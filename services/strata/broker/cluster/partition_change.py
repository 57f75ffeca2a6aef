"""What the controller changes in a partition's registration: elections, ISR fencing, reassignment.

Pure (no I/O): ``ClusterImage`` values in, new ``PartitionRegistration`` values out (Kafka's
``PartitionChangeBuilder`` plus the controller's broker-fencing and reassignment rules). The
controller (``controller.py``) writes what these functions return, each fenced by the
controller epoch and by a compare on the partition's version.

Rules, in the order ``reconcile_partition`` applies them:

1. **Dead replicas leave the ISR.** A replica that is not registered (its lease expired or it
   shut down) is removed from the ISR, unless no member is left: the ISR is never empty, so
   the last in-sync replicas are remembered while the partition is offline.
2. **A leader that is gone is replaced** — not registered, or registered with another broker
   epoch than the one it was elected under (it restarted: the new incarnation must be told its
   role by a new leader epoch). The new leader is the first replica, in replica order
   (preferred first), that is in the ISR and live. Without one, with
   ``unclean.leader.election.enable`` the first live replica is elected (ISR = {it}: data may be
   lost, which is what unclean means); otherwise the partition is offline (``leader = -1``).
3. **An offline partition gets a leader** as soon as a member of its ISR (or, unclean, any
   replica) is live again.
4. **A reassignment completes** once every adding replica is in the ISR: ``replicas`` becomes
   the target set, the removed replicas leave the ISR, and a leader that is being removed hands
   over to the first target replica in the ISR.
5. **Preferred leader election** (``preferred=True``: ``auto.leader.rebalance.enable``'s timer,
   ElectLeaders PREFERRED): the first replica becomes leader when it is live, in the ISR and
   not leading already.

Every change bumps ``partition_epoch``; a leader change bumps ``leader_epoch`` too and records
the new leader's broker epoch.

A broker that starts (a new incarnation of its ``node.id``) first leaves every ISR it is in
(``leave_isr_on_restart``): its log may have lost a tail its previous incarnation had (a
damaged or unflushed segment), so it counts as in sync again only once it has caught up with
the leader (Kafka treats a bounced broker as failed, then started). The last member of an ISR
stays: the ISR is never empty, and the last in-sync copy is the best there is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from strata.broker.cluster.image import NO_LEADER, BrokerRegistration, PartitionRegistration


def _first_live(candidates: tuple[int, ...], allowed: set[int] | None,
                live: Mapping[int, BrokerRegistration]) -> int | None:
    for replica in candidates:
        if replica in live and (allowed is None or replica in allowed):
            return replica
    return None


def _elect(p: PartitionRegistration, leader: int, isr: tuple[int, ...],
           live: Mapping[int, BrokerRegistration], **changes: object) -> PartitionRegistration:
    broker_epoch = live[leader].epoch if leader in live else 0
    return p.with_changes(leader=leader, isr=isr, leader_broker_epoch=broker_epoch,
                          leader_epoch=p.leader_epoch + 1, **changes)


def leader_is_gone(p: PartitionRegistration, live: Mapping[int, BrokerRegistration]) -> bool:
    if not p.has_leader:
        return False
    broker = live.get(p.leader)
    return broker is None or broker.epoch != p.leader_broker_epoch


def reconcile_partition(p: PartitionRegistration, registered: Mapping[int, BrokerRegistration],
                        *, unclean: bool = False, preferred: bool = False,
                        shutting_down: frozenset[int] = frozenset()
                        ) -> PartitionRegistration | None:
    """The registration ``p`` should change to, or None when it is right as it is. Brokers in
    ``shutting_down`` count as live but are never elected."""
    live = registered
    if shutting_down:
        live = {i: b for i, b in registered.items() if i not in shutting_down}
    current = p
    # 1. Dead replicas leave the ISR (never emptying it).
    isr = tuple(r for r in p.isr if r in registered) or p.isr
    # 2./3. Leadership.
    if leader_is_gone(p, registered) or not p.has_leader:
        # A restarted leader (live, new epoch) may lead again when nobody else can.
        candidates = set(isr)
        leader = _first_live(p.target_replicas, candidates - {p.leader}, live)
        if leader is None:
            leader = _first_live(p.target_replicas, candidates, live)
        if leader is not None:
            current = _elect(p, leader, isr, live)
        elif unclean and (leader := _first_live(p.target_replicas, None, live)) is not None:
            current = _elect(p, leader, (leader,), live)
        elif p.has_leader:
            current = p.with_changes(leader=NO_LEADER, isr=isr, leader_broker_epoch=0)
        elif isr != p.isr:
            current = p.with_changes(isr=isr)
    elif isr != p.isr:
        current = p.with_changes(isr=isr)
    # 4. Reassignment.
    if current.adding and set(current.adding) <= set(current.isr) and current.has_leader:
        target = current.target_replicas
        new_isr = tuple(r for r in current.isr if r in target) or (target[0],)
        if current.leader in target:
            current = current.with_changes(replicas=target, isr=new_isr, adding=(),
                                           removing=())
        else:
            leader = _first_live(target, set(new_isr), live)
            if leader is not None:
                current = _elect(current, leader, new_isr, live, replicas=target, adding=(),
                                 removing=())
    elif current.removing and not current.adding and current.has_leader:
        target = current.target_replicas
        new_isr = tuple(r for r in current.isr if r in target)
        leader = current.leader if current.leader in target else _first_live(
            target, set(new_isr), live)
        if new_isr and leader is not None:
            if leader == current.leader:
                current = current.with_changes(replicas=target, isr=new_isr, removing=())
            else:
                current = _elect(current, leader, new_isr, live, replicas=target, removing=())
    # 5. Preferred leader.
    if preferred and current.has_leader and current.replicas:
        first = current.replicas[0]
        if first != current.leader and first in current.isr and first in live:
            current = _elect(current, first, current.isr, live)
    if current == p:
        return None
    # Several steps above each bumped the epochs; one change is one bump.
    leader_moved = current.leader != p.leader or current.leader_broker_epoch != \
        p.leader_broker_epoch
    return _one_bump(p, current, leader_moved)


def _one_bump(before: PartitionRegistration, after: PartitionRegistration,
              leader_moved: bool) -> PartitionRegistration:
    return replace(after, partition_epoch=before.partition_epoch + 1,
                   leader_epoch=before.leader_epoch + (1 if leader_moved else 0))


def reassign(p: PartitionRegistration, target: tuple[int, ...]) -> PartitionRegistration:
    """Start moving ``p`` to ``target`` (KIP-455): replicas become target + the replicas that
    are leaving; ``adding`` / ``removing`` record the difference. The controller completes it
    (``reconcile_partition`` rule 4) once the new replicas are in the ISR. A target equal to
    the current replicas cancels a reassignment in progress."""
    original = tuple(r for r in p.replicas if r not in p.adding) if p.adding else p.replicas
    if target == original or target == p.replicas:
        return p.with_changes(replicas=target, adding=(), removing=(),
                              isr=tuple(r for r in p.isr if r in target) or p.isr)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    replicas = target + removing
    return p.with_changes(replicas=replicas, adding=adding, removing=removing)


def leave_isr_on_restart(p: PartitionRegistration, node_id: int) -> PartitionRegistration | None:
    """``p`` without the starting broker ``node_id`` in its ISR — and without it as leader
    (leaderless until the controller elects an ISR member) — or None when ``node_id`` is not
    in the ISR or is its last member."""
    if node_id not in p.isr or p.isr == (node_id,):
        return None
    isr = tuple(r for r in p.isr if r != node_id)
    if p.leader == node_id:
        return p.with_changes(isr=isr, leader=NO_LEADER, leader_broker_epoch=0)
    return p.with_changes(isr=isr)


def controlled_shutdown(p: PartitionRegistration, node_id: int,
                        live: Mapping[int, BrokerRegistration]) -> PartitionRegistration | None:
    """Before ``node_id`` shuts down: hand leadership of ``p`` to another live ISR member, which
    leaves ``node_id`` out of the ISR (Kafka's controlled shutdown); None when ``node_id`` does
    not lead ``p`` or nobody can take over. (Its other ISR memberships end when its
    registration does: rule 1 of ``reconcile_partition``.)"""
    if p.leader != node_id:
        return None
    others = {r: b for r, b in live.items() if r != node_id}
    isr = tuple(r for r in p.isr if r != node_id)
    leader = _first_live(p.target_replicas, set(isr), others)
    if leader is None:
        return None
    return _elect(p, leader, isr, others)
