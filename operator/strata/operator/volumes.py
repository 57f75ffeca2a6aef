"""Broker volume expansion, decided from the claims as the API server reports them: pure.

Owns Kubernetes quantity parsing (``parse_quantity``: ``10Gi``, ``500M``, ``1.5Ti`` to
bytes, exactly) and ``plan_resize``: which broker claims (``data-<sts>-<ordinal>``, made by
the StatefulSet from its claim template) must have ``spec.resources.requests.storage``
raised to ``storage.size``, which are still waiting for ``status.capacity`` to reach it, and
which already ask for more than the spec (a decrease: Kubernetes cannot shrink a volume, so
it is refused, never patched).

Invariants: a claim is only ever patched upward; a claim is resized when its request, not its
capacity, is below the size (patching again while the volume grows changes nothing); the
StatefulSet's claim template is immutable and keeps the size it was created with, so a claim
created after a resize (scale-up) is raised by the next pass like any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

_SUFFIXES: Final = {
    "": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
QUANTITY_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"


def parse_quantity(text: str) -> int:
    """Bytes in a storage quantity (``ValueError`` for anything else); fractions round up."""
    match = re.match(QUANTITY_PATTERN, str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a storage quantity (such as 10Gi)")
    suffix = match.group(2) or ""
    try:
        value = Decimal(str(text).strip()[: len(str(text).strip()) - len(suffix)])
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a storage quantity (such as 10Gi)") from None
    return int(-(-(value * _SUFFIXES[suffix]) // 1))


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim as far as resizing goes (sizes in bytes; None: not reported)."""

    name: str
    requested: int | None
    capacity: int | None


@dataclass(frozen=True, slots=True)
class ResizePlan:
    patch: tuple[str, ...] = ()  # claims whose request is raised to the size now
    waiting: tuple[str, ...] = ()  # claims whose capacity has not reached the size yet
    larger: tuple[str, ...] = ()  # claims asking for more than the size (a decrease)
    refused: str = ""  # the API server refused a patch (e.g. the class cannot expand): why

    @property
    def resizing(self) -> bool:
        return bool(self.patch or self.waiting) and not self.refused


def claim_view(pvc: Mapping[str, Any]) -> Claim:
    def size(value: Any) -> int | None:
        try:
            return parse_quantity(value) if value is not None else None
        except ValueError:
            return None

    spec = pvc.get("spec") or {}
    return Claim(
        name=str((pvc.get("metadata") or {}).get("name", "")),
        requested=size(((spec.get("resources") or {}).get("requests") or {}).get("storage")),
        capacity=size(((pvc.get("status") or {}).get("capacity") or {}).get("storage")),
    )


def claim_names(stateful_set: str, replicas: int, template: str = "data") -> tuple[str, ...]:
    """The claims the StatefulSet controller creates: ``<template>-<sts>-<ordinal>``."""
    return tuple(f"{template}-{stateful_set}-{i}" for i in range(replicas))


def plan_resize(claims: Iterable[Claim], size: str) -> ResizePlan:
    wanted = parse_quantity(size)
    patch, waiting, larger = [], [], []
    for claim in sorted(claims, key=lambda c: c.name):
        if claim.requested is not None and claim.requested > wanted:
            larger.append(claim.name)
            continue
        if claim.requested is None or claim.requested < wanted:
            patch.append(claim.name)
        if claim.capacity is None or claim.capacity < wanted:
            waiting.append(claim.name)
    return ResizePlan(tuple(patch), tuple(waiting), tuple(larger))
