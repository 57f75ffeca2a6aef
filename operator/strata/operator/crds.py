"""The ``Broker`` and ``Topic`` CustomResourceDefinitions, built in Python (the source of truth).

Owns the OpenAPI v3 schemas (structural: every node typed), defaults, printer columns, the
status and scale subresources, and the CEL ``x-kubernetes-validations`` that reject invalid
changes at admission, before anything is applied (Strimzi reports them only afterwards):

- Topic: ``partitions`` never decreases; ``topicName`` and ``broker`` never change; the
  Kafka topic name (``topicName``, else ``metadata.name``) follows Kafka's rules.
- Broker: ``config`` may not set keys the operator owns (``node.id``, ``listeners``...);
  ``metadata`` names etcd endpoints or ``managed: true``, not both, not neither; listener names
  are short lower-case words with distinct ports; ``interBroker.listener`` is one of them, and
  a SASL one comes with ``interBroker.username`` and ``passwordSecret``; a TLS listener needs
  ``tls.secretName``; ``users`` are unique by (name, mechanism) (a list-map) and never the
  inter-broker user.

kopf's peering CRDs (``kopf.dev/v1`` ``ClusterKopfPeering``, ``KopfPeering``: operator
replicas elect a leader through them) are generated here too.

``charts/strata/crds/*.yaml`` are generated from here::

    python -m strata.operator.crds charts/strata/crds

and a unit test fails when the committed files differ from what this module generates.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import yaml

from strata.operator.crd_schema import (
    Schema,
    age_column,
    boolean,
    conditions,
    crd,
    integer,
    kafka_config,
    obj,
    ready_column,
    string,
)
from strata.operator.model import (
    AUTHENTICATION_TYPES,
    AUTHORIZATION_TYPES,
    DEFAULT_ETCD_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_SCRAM_MECHANISM,
    GROUP,
    KAFKA_PORT,
    LISTENER_NAME_PATTERN,
    OPERATOR_OWNED_CONFIG,
    SCRAM_MECHANISMS,
    TOPIC_NAME_MAX_LENGTH,
    TOPIC_NAME_PATTERN,
)
from strata.operator.rebalance_crd import REBALANCE_CRD
from strata.operator.user_crd import USER_CRD
from strata.operator.volumes import QUANTITY_PATTERN

# ------------------------------------------------------------------------------ Broker
_OWNED_KEYS_CEL = "[" + ", ".join(f"'{k}'" for k in OPERATOR_OWNED_CONFIG) + "]"

BROKER_SPEC: Final[Schema] = obj(
    "The desired broker cluster.",
    {
        "replicas": integer("replicas: how many brokers (node.id 0..replicas-1).", 0, default=3),
        "image": string("image: the Strata image brokers and the admin service run.",
                        default=DEFAULT_IMAGE),
        "imagePullPolicy": string("imagePullPolicy of the broker and admin containers.",
                                  default="IfNotPresent",
                                  enum=["Always", "IfNotPresent", "Never"]),
        "resources": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                      "description": "resources: the broker container's requests and limits."},
        "storage": obj("storage: one persistent volume claim per broker.", {
            "size": string(
                "size of each broker's volume; raising it expands every claim (the storage "
                "class must allow volume expansion); it cannot be lowered.", default="10Gi",
                pattern=QUANTITY_PATTERN, **{"x-kubernetes-validations": [{
                    "rule": "!quantity(self).isLessThan(quantity(oldSelf))",
                    "message": "storage.size cannot be decreased: Kubernetes cannot shrink a "
                               "volume",
                    "reason": "FieldValueForbidden"}]}),
            "storageClassName": string("storageClassName; default: the cluster's default."),
            "deleteClaim": boolean("deleteClaim: delete the claims with the Broker, and a "
                                   "removed broker's claim on scale-down.", False),
            "type": string("type: persistent-claim (one volume: size, storageClassName, "
                           "deleteClaim) or jbod (volumes, each a log dir).",
                           enum=["persistent-claim", "jbod"], default="persistent-claim"),
            "volumes": {
                "type": "array", "minItems": 1, "maxItems": 16,
                "description": "volumes of a jbod broker: each a claim data-<id> mounted at "
                               "/var/lib/strata/data-<id> and listed in log.dirs.",
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                "items": obj("A JBOD volume.", {
                    "id": integer("id of the volume: claim data-<id>; a new id adds a "
                                  "volume (the StatefulSet is re-created, the brokers "
                                  "rolled).", 0),
                    "size": string("size of the volume; raising it expands the claims; it "
                                   "cannot be lowered.", pattern=QUANTITY_PATTERN, **{
                                       "x-kubernetes-validations": [{
                                           "rule": "!quantity(self).isLessThan("
                                                   "quantity(oldSelf))",
                                           "message": "a volume's size cannot be decreased",
                                           "reason": "FieldValueForbidden"}]}),
                    "storageClassName": string("storageClassName; default: the cluster's "
                                               "default."),
                    "deleteClaim": boolean("deleteClaim: delete this volume's claims with "
                                           "the Broker, with a scaled-away broker and once "
                                           "it is removed.", False),
                    "remove": boolean("remove: move this volume's replicas to the brokers' "
                                      "other log dirs, then drop it from the brokers (an "
                                      "entry deleted from the list is removed the same way, "
                                      "its claims kept).", False),
                }, ("id", "size")),
            },
        }, (), **{"x-kubernetes-validations": [
            {"rule": "(has(self.type) && self.type == 'jbod') == has(self.volumes)",
             "message": "storage.volumes is for storage.type jbod, and jbod needs it"},
            {"rule": "(has(self.type) ? self.type : 'persistent-claim') == "
                     "(has(oldSelf.type) ? oldSelf.type : 'persistent-claim')",
             "message": "storage.type cannot change (a StatefulSet's claims are fixed)"},
            {"rule": "!has(self.volumes) || "
                     "self.volumes.exists(v, !has(v.remove) || !v.remove)",
             "message": "storage.volumes needs a volume that is not removed (a broker needs a "
                        "log dir)"},
        ]}),
        "config": {**kafka_config("config: broker settings by Kafka name (num.partitions, "
                                  "default.replication.factor, log.retention.ms...)."),
                   "x-kubernetes-validations": [{
                       "rule": f"!self.exists(k, k in {_OWNED_KEYS_CEL})",
                       "message": "config may not set keys the operator owns: "
                                  + ", ".join(OPERATOR_OWNED_CONFIG),
                   }]},
        "affinity": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                     "description": "affinity of the broker pods (Kubernetes' Affinity); with "
                                    "rack.topologyKey and no podAntiAffinity, brokers prefer "
                                    "distinct nodes."},
        "tolerations": {"type": "array", "description": "tolerations of the broker pods.",
                        "items": {"type": "object",
                                  "x-kubernetes-preserve-unknown-fields": True}},
        "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"},
                         "description": "nodeSelector of the broker pods."},
        "topologySpreadConstraints": {
            "type": "array", "items": {"type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True},
            "description": "topologySpreadConstraints of the broker pods; default with "
                           "rack.topologyKey: maxSkew 1 over that key."},
        "priorityClassName": string("priorityClassName of the broker pods."),
        "rack": obj("rack: rack awareness (broker.rack) from a node label.", {
            "topologyKey": string("topologyKey: the node label whose value is broker.rack, "
                                  "e.g. topology.kubernetes.io/zone."),
        }),
        "metadata": obj(
            "metadata: the metadata store (etcd endpoints, or an etcd the operator runs).",
            {
                "etcd": obj("etcd: an existing etcd.", {
                    "endpoints": {"type": "array", "items": {"type": "string"},
                                  "description": "endpoints as host:port.", "minItems": 1},
                }),
                "managed": boolean("managed: the operator runs an etcd for this Broker.", False),
                "managedReplicas": integer("managedReplicas: members of the managed etcd.", 1,
                                           default=3),
                "etcdImage": string("etcdImage of the managed etcd.", default=DEFAULT_ETCD_IMAGE),
                "managedStorage": obj("managedStorage: each managed etcd member's volume.", {
                    "size": string("size of the volume.", default="1Gi",
                                   pattern=QUANTITY_PATTERN),
                    "storageClassName": string("storageClassName; default: the cluster's "
                                               "default."),
                }),
            },
            (),
            **{"x-kubernetes-validations": [{
                "rule": "has(self.etcd) != (has(self.managed) && self.managed)",
                "message": "set either metadata.etcd.endpoints or metadata.managed: true",
            }]},
        ),
        "admin": obj("admin: the REST admin service.", {
            "enabled": boolean("enabled: deploy the admin service.", True),
            "replicas": integer("replicas of the admin Deployment.", 0, default=1),
            "authentication": obj("authentication: callers of /v1 must log in.", {
                "secretName": string("secretName: a Secret whose auth.json lists bearer "
                                     "tokens and basic users, hashed (python -m "
                                     "strata.admin.credentials)."),
            }),
            "tls": obj("tls: serve HTTPS.", {
                "secretName": string("secretName: a kubernetes.io/tls Secret (tls.crt, "
                                     "tls.key)."),
            }),
        }),
        "metrics": obj("metrics: Prometheus metrics on port 9404.", {
            "enabled": boolean("enabled: annotate and expose the metrics port.", True),
        }),
        "listeners": {
            "type": "object",
            "description": "listeners: Kafka listeners by name (lower case; Kafka's name is "
                           f"the upper case). Default: plaintext on {KAFKA_PORT}.",
            "maxProperties": 8,
            "additionalProperties": obj("A listener.", {
                "port": integer("port of the Kafka protocol.", 1, default=KAFKA_PORT,
                                maximum=65535),
                "tls": boolean("tls: encrypt with the certificate of tls.secretName.", False),
                "authentication": obj("authentication: who may connect.", {
                    "type": string("type: SASL mechanism, tls (client certificates) or none.",
                                   enum=list(AUTHENTICATION_TYPES), default="none"),
                }),
            }),
            "x-kubernetes-validations": [
                {"rule": f"self.all(k, k.matches('{LISTENER_NAME_PATTERN}'))",
                 "message": "listener names are lower-case letters and digits, at most 15"},
                {"rule": "self.all(a, self.all(b, a == b || "
                         "(has(self[a].port) ? self[a].port : 9092) != "
                         "(has(self[b].port) ? self[b].port : 9092)))",
                 "message": "every listener needs its own port"},
            ],
        },
        "tls": obj("tls: the brokers' TLS material. Without secretName or certManager, the "
                   "operator makes a cluster CA and per-broker certificates itself.", {
            "secretName": string("secretName: a Secret with tls.crt, tls.key and ca.crt "
                                 "(cert-manager's layout); the certificate must name "
                                 "*.<name>-brokers.<namespace>.svc and "
                                 "<name>-bootstrap.<namespace>.svc."),
            "certManager": obj("certManager: cert-manager issues the brokers' certificate "
                               "(a Certificate <name>-broker-certs).", {
                "issuerRef": obj("issuerRef: cert-manager's Issuer or ClusterIssuer.", {
                    "name": string("name of the issuer.", minLength=1),
                    "kind": string("kind of the issuer.", enum=["Issuer", "ClusterIssuer"],
                                   default="Issuer"),
                    "group": string("group of the issuer.", default="cert-manager.io"),
                }, ("name",)),
            }),
            "alternativeNames": {"type": "array", "maxItems": 32,
                                 "items": {"type": "string", "minLength": 1},
                                 "description": "alternativeNames: extra DNS names or IP "
                                                "addresses of every broker certificate."},
            "validityDays": integer("validityDays of broker and user certificates.", 1,
                                    default=365),
            "renewalDays": integer("renewalDays: renew (or rotate the CA) this long before "
                                   "the end.", 1, default=30),
            "caValidityDays": integer("caValidityDays of the CAs the operator makes.", 1,
                                      default=1825),
        }, (), **{"x-kubernetes-validations": [
            {"rule": "!(has(self.secretName) && has(self.certManager))",
             "message": "set either tls.secretName or tls.certManager, not both"}]}),
        "interBroker": obj("interBroker: how brokers (and the operator and admin service) "
                           "connect to each other.", {
            "listener": string("listener: the listener brokers replicate over; default: "
                               "plaintext, else the lowest port."),
            "username": string("username: the SCRAM user brokers log in as on a SASL listener "
                               "(created at broker start; a super user)."),
            "passwordSecret": obj("passwordSecret: the Secret key holding its password.", {
                "name": string("name of the Secret."),
                "key": string("key in the Secret.", default="password"),
            }, ("name",)),
        }),
        "authorization": obj("authorization: ACLs on the brokers and the admin service.", {
            "type": string("type: simple (Kafka's StandardAuthorizer, ACLs) or none.",
                           enum=list(AUTHORIZATION_TYPES), default="none"),
            "superUsers": {"type": "array", "items": {"type": "string",
                                                      "pattern": "^[A-Za-z]+:.+$"},
                           "description": "superUsers: principals allowed everything "
                                          "(User:admin)."},
            "allowEveryoneIfNoAclFound": boolean(
                "allowEveryoneIfNoAclFound: a resource no ACL names is open to all.", False),
        }),
        "users": {
            "type": "array",
            "description": "users: SCRAM users the operator keeps in the cluster "
                           "(AlterUserScramCredentials), passwords from Secrets; a user "
                           "removed from the list is deleted.",
            "maxItems": 1000,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "mechanism"],
            "items": obj("A SCRAM user.", {
                "name": string("name: the user (principal User:<name>).", minLength=1,
                               maxLength=255),
                "mechanism": string("mechanism of the credential.",
                                    enum=list(SCRAM_MECHANISMS),
                                    default=DEFAULT_SCRAM_MECHANISM),
                "passwordSecret": obj("passwordSecret: the Secret key holding the password "
                                      "(a new resourceVersion is applied at the next pass).", {
                    "name": string("name of the Secret."),
                    "key": string("key in the Secret.", default="password"),
                }, ("name",)),
            }, ("name", "passwordSecret")),
        },
    },
    required=("metadata",),
    **{"x-kubernetes-validations": [
        {"rule": "!has(self.interBroker) || !has(self.interBroker.listener) || "
                 "(has(self.listeners) && self.interBroker.listener in self.listeners)",
         "message": "interBroker.listener must be one of listeners"},
        {"rule": "!has(self.users) || !has(self.interBroker) || "
                 "!has(self.interBroker.username) || "
                 "self.users.all(u, u.name != self.interBroker.username)",
         "message": "users may not list the inter-broker user (interBroker.username)"},
    ]},
)

def in_flight() -> Schema:
    """A batch of reassignments in flight (a fresh object each time: no YAML anchors)."""
    return {"type": "array", "description": "The batch being moved.",
            "items": obj("A partition's target replicas.", {
                "topic": string("Topic."), "partition": integer("Partition."),
                "replicas": {"type": "array", "items": {"type": "integer"},
                             "description": "Target replicas, preferred first."},
            })}


def throttle() -> Schema:
    """The replication throttles of that batch (``throttle.ThrottlePlan.to_status``)."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "description": "The replication throttles set for the batch being moved (removed "
                           "once it is done)."}


BROKER_STATUS: Final[Schema] = obj("Observed state, written by the operator.", {
    "conditions": conditions(),
    "observedGeneration": integer("The spec generation last reconciled."),
    "replicas": integer("Broker pods that exist."),
    "readyReplicas": integer("Broker pods that are ready."),
    "selector": string("Label selector of the broker pods (for the scale subresource)."),
    "bootstrapServers": string("Kafka bootstrap address for clients in the cluster."),
    "adminUrl": string("URL of the REST admin service."),
    "certificates": obj("Where the brokers' certificates come from and the cluster CA.", {
        "source": string("operator or cert-manager."),
        "caNotAfter": string("When the cluster CA ends (RFC 3339)."),
        "caRotation": string("The CA rotation stage under way: TrustNewCa, "
                             "ReissueCertificates or DropOldCa (\"\": none)."),
        "clientsCaNotAfter": string("When the clients CA ends (RFC 3339)."),
        "clientsCaRotation": string("The clients CA rotation stage under way: TrustNewCa, "
                                    "ReissueCertificates or DropOldCa (\"\": none)."),
        "clientsCaWaitingFor": {
            "type": "array", "items": {"type": "string"},
            "description": "In ReissueCertificates: the TLS users whose certificate the old "
                           "clients CA still signs (the rotation waits for them)."},
    }),
    "rebalance": obj("The last self-balancing run (after a scale-up or a scale-down, or "
                     "asked by the annotation strata.dev/rebalance: \"true\").", {
        "state": string("Pending, Moving or Done.", enum=["Pending", "Moving", "Done"]),
        "reason": string("What started it: ScaleUp, ScaleDown or Requested."),
        "batchesDone": integer("Reassignment batches sent."),
        "batchesTotal": integer("Batches sent plus those the current plan still needs."),
        "message": string("Progress, or the final spread of replicas and leaders."),
        "inFlight": in_flight(),
        "throttle": throttle(),
    }),
    "scaleDown": obj("A scale-down's drain (absent when none): the replicas of the leaving "
                     "brokers moved off in throttled batches before the StatefulSet shrinks.", {
        "batchesDone": integer("Drain batches done."),
        "inFlight": in_flight(),
        "throttle": throttle(),
    }),
    "volumeRemoval": obj("JBOD volumes leaving the brokers (absent when none): their "
                         "replicas are moved to the brokers' other log dirs first.", {
        "volumes": {"type": "array", "items": {"type": "integer"},
                    "description": "Ids of the leaving volumes."},
        "replicasLeft": integer("Replicas still in their log dirs, over every broker."),
        "state": string("MovingReplicas, LogDirsUnavailable or MoveRefused."),
        "message": string("Progress, or why it waits."),
    }),
    "users": {
        "type": "array",
        "description": "The SCRAM users of spec.users, and removed ones whose deletion is "
                       "pending.",
        "items": obj("One user's state.", {
            "name": string("The user."),
            "mechanism": string("The SCRAM mechanism."),
            "secretVersion": string("resourceVersion of the password Secret last applied; "
                                    "absent: the operator never set this credential."),
            "conditions": conditions(),
        }, ("name", "mechanism")),
    },
})

BROKER_CRD: Final = crd(
    "Broker", "brokers", "sb", BROKER_SPEC, BROKER_STATUS,
    [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
     {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
     ready_column(),
     {"name": "Bootstrap", "type": "string", "jsonPath": ".status.bootstrapServers",
      "priority": 1},
     {"name": "Rebalance", "type": "string", "jsonPath": ".status.rebalance.state",
      "priority": 1},
     age_column()],
    scale=True,
)

# ------------------------------------------------------------------------------ Topic
TOPIC_SPEC: Final[Schema] = obj(
    "The desired topic.",
    {
        "broker": string("broker: the name of the Broker (same namespace) holding the topic."),
        "topicName": string(
            "topicName in Kafka; default: this resource's name. Kafka's rules: ASCII letters, "
            "digits, '.', '_', '-', at most 249 characters, not '.' or '..'.",
            minLength=1, maxLength=TOPIC_NAME_MAX_LENGTH, pattern=TOPIC_NAME_PATTERN,
            **{"x-kubernetes-validations": [{
                "rule": "self != '.' && self != '..'",
                "message": "topicName cannot be '.' or '..'"}]}),
        "partitions": integer("partitions: may grow, never shrink.", 1, default=1),
        "replicas": integer("replicas (replication factor); default: the broker's "
                            "default.replication.factor. A change is carried out by "
                            "partition reassignment; more than the brokers is refused.", 1),
        "config": kafka_config("config: topic configs by Kafka name (retention.ms, "
                               "cleanup.policy...); removing a key resets it to the default."),
    },
    required=("broker",),
    **{"x-kubernetes-validations": [
        {"rule": "self.partitions >= oldSelf.partitions",
         "message": "partitions cannot be decreased", "reason": "FieldValueForbidden"},
        {"rule": "(has(self.topicName) ? self.topicName : '') == "
                 "(has(oldSelf.topicName) ? oldSelf.topicName : '')",
         "message": "topicName cannot be changed", "reason": "FieldValueForbidden"},
        {"rule": "self.broker == oldSelf.broker",
         "message": "broker cannot be changed", "reason": "FieldValueForbidden"},
    ]},
)

TOPIC_STATUS: Final[Schema] = obj("Observed state, written by the operator.", {
    "conditions": conditions(),
    "observedGeneration": integer("The spec generation last reconciled."),
    "topicName": string("The Kafka topic this resource manages."),
    "partitions": integer("Partitions the topic has in Kafka."),
    "replicas": integer("Replication factor the topic has in Kafka (its smallest partition's "
                        "replica count)."),
})

TOPIC_CRD: Final = crd(
    "Topic", "topics", "st", TOPIC_SPEC, TOPIC_STATUS,
    [{"name": "Topic", "type": "string", "jsonPath": ".status.topicName"},
     {"name": "Partitions", "type": "integer", "jsonPath": ".status.partitions"},
     {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas"},
     ready_column(),
     {"name": "Reason", "type": "string",
      "jsonPath": '.status.conditions[?(@.type=="Ready")].reason', "priority": 1},
     age_column()],
    scale=False,
    root_rules=({
        "rule": "has(self.spec.topicName) || (size(self.metadata.name) <= "
                f"{TOPIC_NAME_MAX_LENGTH} && self.metadata.name.matches('{TOPIC_NAME_PATTERN}'))",
        "message": "the resource name is not a legal Kafka topic name (letters, digits, '.', "
                   f"'_', '-', at most {TOPIC_NAME_MAX_LENGTH}): set spec.topicName",
    },),
)

ALL_CRDS: Final = {"brokers": BROKER_CRD, "topics": TOPIC_CRD, "users": USER_CRD,
                   "rebalances": REBALANCE_CRD}


# ------------------------------------------------------------------------------ kopf peering
def peering_crd(kind: str, plural: str, scope: str) -> dict[str, Any]:
    """kopf's peering resource (``kopf.dev/v1``): several operator replicas see each other
    through it and only the highest priority works. Its content is kopf's own."""
    free: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kopf.dev",
                     "labels": {"app.kubernetes.io/name": "strata"}},
        "spec": {
            "group": "kopf.dev",
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": free, "status": free}}},
            }],
        },
    }


PEERING_CRDS: Final = {
    "clusterkopfpeerings": peering_crd("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
    "kopfpeerings": peering_crd("KopfPeering", "kopfpeerings", "Namespaced"),
}


def render(crd_object: dict[str, Any]) -> str:
    """The YAML text of one CRD, as committed in the chart."""
    header = "# Generated by `python -m strata.operator.crds`: do not edit.\n"
    return header + str(yaml.safe_dump(crd_object, sort_keys=False, width=100))


def file_name(plural: str) -> str:
    return f"{plural}.{'kopf.dev' if plural in PEERING_CRDS else GROUP}.yaml"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for plural, crd_object in {**ALL_CRDS, **PEERING_CRDS}.items():
        path = directory / file_name(plural)
        path.write_text(render(crd_object), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "charts/strata/crds")):
        print(written_path)
