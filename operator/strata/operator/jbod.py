"""A broker's volumes: one claim (``storage.type: persistent-claim``, the default) or several
(``storage.type: jbod``, Strimzi's JBOD), each a log dir.

Pure. Owns the mapping volume -> claim template -> mount -> ``log.dirs`` entry:

* ``persistent-claim``: template ``data``, mounted at ``/var/lib/strata``, log dir
  ``/var/lib/strata/data`` (what every Broker had before JBOD: unchanged names, no roll);
* ``jbod``: per volume ``{id, size, storageClassName, deleteClaim}`` template ``data-<id>``,
  mounted at ``/var/lib/strata/data-<id>``, log dir ``/var/lib/strata/data-<id>/data`` (a
  subdirectory, so a file system's ``lost+found`` is not a log dir entry); ``log.dirs`` lists
  them by id. The broker spreads new partitions over its log dirs (Kafka's rule).

Volume ids are unique and fixed for the Broker's life (a StatefulSet's claim templates cannot
change: refused at admission), sizes only grow (per volume, as ``storage.size``).
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
                              bool(item.get("deleteClaim", False))))
    if len({v.id for v in volumes}) != len(volumes):
        raise VolumeSpecError("storage.volumes[].id must be unique")
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
