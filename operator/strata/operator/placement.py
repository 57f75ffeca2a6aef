"""Where broker pods run: the pod-spec placement fields of a Broker, and the rack defaults.

Owns ``pod_placement``: ``affinity``, ``tolerations``, ``nodeSelector``,
``topologySpreadConstraints`` and ``priorityClassName`` from the Broker spec, as Kubernetes
fields of the broker pod template (pure, no I/O). With ``rack.topologyKey`` set, a cluster
whose brokers could all land in one zone is what rack awareness is meant to prevent, so two
defaults are added, each only when the user gave none of its kind:

- a ``topologySpreadConstraints`` entry on the rack key (``maxSkew: 1``,
  ``whenUnsatisfiable: ScheduleAnyway``: a zone down must not leave a broker unschedulable);
- a *preferred* pod anti-affinity between the brokers of this cluster on
  ``kubernetes.io/hostname`` (two brokers on one node lose two replicas at once), weight 100.

Invariant: an empty placement adds no key to the pod template (a Broker without placement
keeps the config hash it had, so upgrading the operator rolls nothing).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from strata.operator.model import BrokerSpec

Obj = dict[str, Any]

HOSTNAME_KEY: Final = "kubernetes.io/hostname"


def pod_placement(spec: BrokerSpec, broker_labels: Mapping[str, str]) -> Obj:
    """The placement keys of the broker pod spec (only those that have a value);
    ``broker_labels`` select this cluster's broker pods."""
    selector: Obj = {"matchLabels": dict(broker_labels)}
    given = spec.placement
    out: Obj = {}
    affinity = copy.deepcopy(dict(given.affinity))
    spread = [copy.deepcopy(dict(c)) for c in given.topology_spread_constraints]
    key = spec.rack_topology_key
    if key:
        if not spread:
            spread = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
                       "labelSelector": selector}]
        if "podAntiAffinity" not in affinity:
            affinity["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "podAffinityTerm": {"topologyKey": HOSTNAME_KEY,
                                        "labelSelector": copy.deepcopy(selector)},
                }]}
    if affinity:
        out["affinity"] = affinity
    if given.tolerations:
        out["tolerations"] = [copy.deepcopy(dict(t)) for t in given.tolerations]
    if given.node_selector:
        out["nodeSelector"] = dict(given.node_selector)
    if spread:
        out["topologySpreadConstraints"] = spread
    if given.priority_class_name:
        out["priorityClassName"] = given.priority_class_name
    return out
