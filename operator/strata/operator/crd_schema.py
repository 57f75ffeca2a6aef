"""Building blocks of the CRDs' OpenAPI v3 schemas (structural: every node typed), printer
columns and the CRD object itself: pure functions returning dicts, shared by ``crds.py``
(Broker, Topic) and ``user_crd.py`` (User). ``model.VERSION`` is served and stored; the
``model.OLDER_VERSIONS`` are still served, deprecated, with the same schema (so conversion is
Kubernetes' ``None`` strategy: only ``apiVersion`` changes, no webhook); every CRD has the
status subresource and, if asked, the scale one.
"""

from __future__ import annotations

from typing import Any

from strata.operator.model import GROUP, OLDER_VERSIONS, VERSION

Schema = dict[str, Any]


def string(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def integer(description: str, minimum: int | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "integer", "description": description, **extra}
    if minimum is not None:
        schema["minimum"] = minimum
    return schema


def boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def obj(description: str, properties: dict[str, Schema], required: tuple[str, ...] = (),
        **extra: Any) -> Schema:  # extra: schema keys such as x-kubernetes-validations
    schema: Schema = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


def kafka_config(description: str) -> Schema:
    """A map of Kafka config names to values; numbers may be written unquoted."""
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"x-kubernetes-int-or-string": True},
    }


def conditions() -> Schema:
    condition = obj(
        "A condition (Kubernetes convention): type Ready, a CamelCase reason, a message.",
        {
            "type": string("The condition type (Ready)."),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string("CamelCase reason of the last transition."),
            "message": string("Human-readable detail."),
            "lastTransitionTime": string("When status last changed.", format="date-time"),
            "observedGeneration": integer("The generation this condition was computed for."),
        },
        required=("type", "status"),
    )
    return {"type": "array", "description": "Current conditions.", "items": condition,
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


def ready_column() -> dict[str, Any]:
    return {"name": "Status", "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}


def age_column() -> dict[str, Any]:
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def crd(kind: str, plural: str, short: str, spec: Schema, status: Schema,
        columns: list[dict[str, Any]], scale: bool,
        root_rules: tuple[dict[str, str], ...] = (),
        versions: tuple[str, ...] = (VERSION, *OLDER_VERSIONS)) -> dict[str, Any]:
    """The CRD; ``root_rules``: CEL rules on the whole object (they may read metadata.name);
    ``versions``: the served ones (a kind new at ``VERSION`` serves no older one)."""
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/name": "strata"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "shortNames": [short], "categories": ["strata"]},
            # The schemas of every served version are identical, so the API server converts
            # by rewriting apiVersion alone (strategy None: no webhook).
            "conversion": {"strategy": "None"},
            "versions": [version(name, kind, spec, status, subresources, columns, root_rules)
                         for name in versions],
        },
    }


def version(name: str, kind: str, spec: Schema, status: Schema, subresources: dict[str, Any],
            columns: list[dict[str, Any]], root_rules: tuple[dict[str, str], ...]
            ) -> dict[str, Any]:
    """One entry of ``spec.versions``: ``VERSION`` is stored, an older one only served (and
    marked deprecated, with the version to move to)."""
    entry: dict[str, Any] = {"name": name, "served": True, "storage": name == VERSION}
    if name != VERSION:
        entry["deprecated"] = True
        entry["deprecationWarning"] = (f"{GROUP}/{name} {kind} is deprecated; use "
                                       f"{GROUP}/{VERSION}")
    entry.update({
        "schema": {"openAPIV3Schema": obj(
            f"A Strata {kind}.",
            {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
             "metadata": {"type": "object"}, "spec": spec, "status": status},
            required=("spec",),
            **({"x-kubernetes-validations": list(root_rules)} if root_rules else {}),
        )},
        "subresources": subresources,
        "additionalPrinterColumns": columns,
    })
    return entry
