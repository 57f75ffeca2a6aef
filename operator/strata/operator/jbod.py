"""A broker's volumes: one claim (``storage.type: persistent-claim``, the default) or several
(``storage.type: jbod``, Strimzi's JBOD), each a log dir.

Pure. Owns the mapping volume -> claim template -> mount -> ``log.dirs`` entry:

* ``persistent-claim``: template ``data``, mounted at ``/var/lib/strata``, log dir
  ``/var/lib/strata/data`` (what every Broker had before JBOD: unchanged names, no roll);
* ``jbod``: per volume ``{id, size, storageClassName, deleteClaim}`` template ``data-<id>``,
  mounted at ``/var/lib/strata/data-<id>``, log dir ``/var/lib/strata/data-<id>/data`` (a
  subdirectory, so a file system's ``lost+found`` is not a log dir entry); ``log.dirs`` lists
  them by id. The broker spreads new partitions over its log dirs (Kafka's rule).

Volume ids are unique; sizes only grow (per volume, as ``storage.size``). A StatefulSet's claim
templates cannot change, so adding or removing a volume re-creates the StatefulSet (the pods
are orphaned and adopted, then rolled). A volume leaves the brokers (``remove: true``, or its
entry deleted) only once no replica is left in its log dir on any broker: until then it stays
in the StatefulSet and ``log.dirs`` (``effective_volumes``) while ``plan_moves`` moves its
replicas to the broker's other dirs (AlterReplicaLogDirs, one batch at a time). At least one
volume always stays (refused at admission).
``deleteClaim`` per volume: with every volume's set, the StatefulSet's retention policy
deletes the claims; with a mix, the policy retains them and the operator deletes the claims of
``deleteClaim`` volumes itself (``claims_to_delete``) once their broker is scaled away, and
marks them owned by the Broker so they go with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

PERSISTENT_CLAIM: Final = "persistent-claim"
JBOD: Final = "jbod"
STORAGE_TYPES: Final = (PERSISTENT_CLAIM, JBOD)
DATA_ROOT: Final = "/var/lib/strata"


class VolumeSpecError(ValueError):
    """A ``storage`` value the CRD schema would have refused."""


@dataclass(frozen=True, slots=True)
class Volume:
    """One broker volume: its claim template, mount and log dir."""

    id: int | None  # None: the single persistent-claim volume
    size: str
    storage_class_name: str | None = None
    delete_claim: bool = False
    remove: bool = False  # jbod: move its data off, then drop it from the brokers

    @property
    def template(self) -> str:
        return "data" if self.id is None else f"data-{self.id}"

    @property
    def mount_path(self) -> str:
        return DATA_ROOT if self.id is None else f"{DATA_ROOT}/data-{self.id}"

    @property
    def log_dir(self) -> str:
        return f"{self.mount_path}/data"


def parse_volumes(raw: Any) -> tuple[str, tuple[Volume, ...]]:
    """``(storage.type, the jbod volumes)``; for a single claim the volumes are ``()``."""
    storage = raw if isinstance(raw, Mapping) else {}
    kind = str(storage.get("type", PERSISTENT_CLAIM))
    if kind not in STORAGE_TYPES:
        raise VolumeSpecError(f"storage.type must be one of {', '.join(STORAGE_TYPES)}")
    if kind == PERSISTENT_CLAIM:
        return kind, ()
    items = storage.get("volumes")
    if not isinstance(items, list) or not items:
        raise VolumeSpecError("storage.type jbod needs storage.volumes (at least one)")
    volumes: list[Volume] = []
    for item in items:
        if not isinstance(item, Mapping):
            raise VolumeSpecError("storage.volumes[] must be objects")
        volume_id = item.get("id")
        if not isinstance(volume_id, int) or isinstance(volume_id, bool) or volume_id < 0:
            raise VolumeSpecError(f"storage.volumes[].id must be an integer >= 0, got "
                                  f"{volume_id!r}")
        if not item.get("size"):
            raise VolumeSpecError(f"storage.volumes[{volume_id}].size is required")
        volumes.append(Volume(volume_id, str(item["size"]),
                              item.get("storageClassName") or None,
                              bool(item.get("deleteClaim", False)),
                              bool(item.get("remove", False))))
    if len({v.id for v in volumes}) != len(volumes):
        raise VolumeSpecError("storage.volumes[].id must be unique")
    if all(v.remove for v in volumes):
        raise VolumeSpecError("storage.volumes cannot all be removed: a broker needs a log dir")
    return kind, tuple(sorted(volumes, key=lambda v: v.id or 0))


def volumes_of(size: str, storage_class_name: str | None, delete_claim: bool,
               jbod: Sequence[Volume]) -> tuple[Volume, ...]:
    """Every volume of a broker: the JBOD ones, else the single claim."""
    return tuple(jbod) or (Volume(None, size, storage_class_name, delete_claim),)


def retention(volumes: Sequence[Volume]) -> str:
    """The StatefulSet's claim retention: Delete only when every volume says deleteClaim."""
    return "Delete" if all(v.delete_claim for v in volumes) else "Retain"


def claim_owner(volumes: Sequence[Volume], stateful_set: str,
                claim: str) -> tuple[Volume, int] | None:
    """The volume and broker ordinal of a claim ``<template>-<sts>-<ordinal>`` (None: not
    one of this StatefulSet's)."""
    for volume in volumes:
        prefix = f"{volume.template}-{stateful_set}-"
        ordinal = claim[len(prefix):]
        if claim.startswith(prefix) and ordinal.isdigit():
            return volume, int(ordinal)
    return None


def claims_to_delete(volumes: Sequence[Volume], stateful_set: str, replicas: int,
                     existing: Sequence[str]) -> list[tuple[str, str]]:
    """``(claim, pod)`` of ``deleteClaim`` volumes whose broker was scaled away, when the
    StatefulSet retains claims (a mix of volumes; the policy handles the all-Delete case)."""
    if retention(volumes) == "Delete":
        return []
    doomed = []
    for name in sorted(existing):
        owner = claim_owner(volumes, stateful_set, name)
        if owner is not None and owner[0].delete_claim and owner[1] >= replicas:
            doomed.append((name, f"{stateful_set}-{owner[1]}"))
    return doomed


# ---------------------------------------------------------------- adding and removing volumes
TopicPartition = tuple[str, int]


def template_id(template: str) -> int | None:
    """The volume id of a jbod claim template ``data-<id>`` (None: not one)."""
    prefix, _, number = template.partition("-")
    return int(number) if prefix == "data" and number.isdigit() else None


def live_templates(stateful_set: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The claim template names of a live StatefulSet (``()``: none, or no StatefulSet)."""
    spec = (stateful_set or {}).get("spec") or {}
    return tuple(str((t.get("metadata") or {}).get("name", ""))
                 for t in spec.get("volumeClaimTemplates") or ())


def leaving_volumes(volumes: Sequence[Volume], live: Sequence[str]) -> tuple[Volume, ...]:
    """Volumes still in the live StatefulSet that the spec removes: listed with ``remove:
    true``, or no longer listed (then with the live template's id and ``deleteClaim`` off)."""
    listed = {v.template: v for v in volumes}
    leaving = []
    for template in live:
        volume_id = template_id(template)
        if volume_id is None:
            continue
        volume = listed.get(template)
        if volume is None:
            leaving.append(Volume(volume_id, "0", remove=True))
        elif volume.remove:
            leaving.append(volume)
    return tuple(sorted(leaving, key=lambda v: v.id or 0))


def effective_volumes(volumes: Sequence[Volume], live: Sequence[str],
                      drained: bool) -> tuple[Volume, ...]:
    """The jbod volumes the brokers run with: the kept ones, plus the leaving ones until their
    data is moved off (``drained``: no replica left in any leaving dir on any broker). A
    volume already out of the live StatefulSet never comes back by its ``remove``."""
    kept = [v for v in volumes if not v.remove]
    if not drained:
        kept += leaving_volumes(volumes, live)
    return tuple(sorted(kept, key=lambda v: v.id or 0))


def needs_recreate(live: Sequence[str], desired: Sequence[str]) -> bool:
    """A live StatefulSet whose claim templates differ from the desired ones: it must be
    deleted with ``propagationPolicy: Orphan`` and created again (the field is immutable)."""
    return bool(live) and sorted(live) != sorted(desired)


@dataclass(frozen=True, slots=True)
class BrokerDirs:
    """One broker's log dirs as DescribeLogDirs answers: dir -> current replicas, and the
    replicas with a future log (a move in flight) by their destination dir."""

    current: Mapping[str, frozenset[TopicPartition]]
    future: Mapping[str, frozenset[TopicPartition]]


@dataclass(frozen=True, slots=True)
class MovePlan:
    moves: Mapping[TopicPartition, str]  # replica -> destination dir, this batch
    left: int  # replicas still in the leaving dirs (current or future logs)
    in_flight: int  # moves still copying: no new batch until they are done
    refused: str = ""  # nowhere to move them to: why


def plan_moves(dirs: BrokerDirs, leaving: Sequence[str], batch_size: int) -> MovePlan:
    """The next AlterReplicaLogDirs batch of one broker: replicas in a ``leaving`` dir go to
    the kept dir holding the fewest partitions (Kafka's rule for a new replica), at most
    ``batch_size``, and only when no earlier move is still copying."""
    gone = set(leaving)
    kept = sorted(d for d in dirs.current if d not in gone)
    stuck = sorted(tp for d in gone for tp in dirs.current.get(d, ()))
    in_flight = sum(len(r) for r in dirs.future.values())
    left = len(stuck) + sum(len(dirs.future.get(d, ())) for d in gone)
    if not stuck or in_flight:
        return MovePlan({}, left, in_flight)
    if not kept:
        return MovePlan({}, left, in_flight, "no other log dir on this broker")
    load = {d: len(dirs.current[d]) + len(dirs.future.get(d, ())) for d in kept}
    moves: dict[TopicPartition, str] = {}
    for tp in stuck[:max(1, batch_size)]:
        target = min(kept, key=lambda d: (load[d], d))
        moves[tp] = target
        load[target] += 1
    return MovePlan(moves, left, in_flight)


def claims_of_removed(volumes: Sequence[Volume], stateful_set: str, existing: Sequence[str],
                      mounted: Sequence[str]) -> list[str]:
    """Claims of volumes listed with ``remove: true`` and ``deleteClaim`` that no pod mounts
    any more (their volume is out of every broker): the operator deletes them."""
    doomed = [v for v in volumes if v.remove and v.delete_claim]
    return sorted(name for name in existing
                  if claim_owner(doomed, stateful_set, name) is not None
                  and name not in set(mounted))
