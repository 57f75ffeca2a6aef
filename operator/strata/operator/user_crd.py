"""The ``User`` CustomResourceDefinition (Strimzi's KafkaUser): schema, printer columns, CEL.

Owns the OpenAPI schema of a User's ``spec`` and ``status``, with the defaults
``user_spec.UserSpec.parse`` applies, and the CEL rules refusing at admission what can never
work: a changed ``broker`` or ``userName`` (the operator would leave the old user behind),
a cluster ACL with a name, a non-cluster ACL without one. Generated into
``charts/strata/crds/users.strata.dev.yaml`` with the other CRDs (``crds.py``).
"""

from __future__ import annotations

from typing import Final

from strata.operator.crd_schema import (
    Schema,
    age_column,
    conditions,
    crd,
    integer,
    obj,
    ready_column,
    string,
)
from strata.operator.user_spec import (
    AUTHENTICATION,
    DEFAULT_AUTHENTICATION,
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    QUOTA_KEYS,
    RESOURCE_TYPES,
    TLS,
)

_ACL: Final[Schema] = obj("An ACL rule of the user's principal (User:<userName>).", {
    "resource": obj("resource: what the rule is about.", {
        "type": string("type of the resource.", enum=list(RESOURCE_TYPES)),
        "name": string("name of the resource (not for cluster); with patternType prefixed, a "
                       "prefix.", minLength=1),
        "patternType": string("patternType: literal (the name) or prefixed (names starting "
                              "with it).", enum=list(PATTERN_TYPES), default="literal"),
    }, ("type",), **{"x-kubernetes-validations": [
        {"rule": "self.type == 'cluster' || has(self.name)",
         "message": "a topic, group or transactionalId rule needs resource.name"}]}),
    "operations": {"type": "array", "minItems": 1, "description": "operations allowed or "
                   "denied (Kafka's names).", "items": {"type": "string",
                                                        "enum": list(OPERATIONS)}},
    "host": string("host the principal connects from; * for any.", default="*"),
    "type": string("type: allow or deny.", enum=list(PERMISSIONS), default="allow"),
}, ("resource", "operations"))

_QUOTA_DESCRIPTIONS: Final = {
    "producerByteRate": "bytes per second each broker accepts from the user's producers",
    "consumerByteRate": "bytes per second each broker sends to the user's consumers",
    "requestPercentage": "percentage of a request handler and network thread the user may use",
    "controllerMutationRate": "topic partitions per second the user may create or delete",
}

USER_SPEC: Final[Schema] = obj("A Kafka user: its credential, ACLs and quotas.", {
    "broker": string("broker: the name of the Broker (same namespace) the user lives in."),
    "userName": string("userName in Kafka (principal User:<userName>); default: this "
                       "resource's name.", minLength=1, maxLength=255),
    "authentication": obj("authentication: a SCRAM credential or a client certificate; "
                          "absent: none managed.", {
        "type": string("type: the SCRAM mechanism, or tls: a client certificate CN=<userName> "
                       "from the Broker's clients CA in a Secret named after this User "
                       "(user.crt, user.key, ca.crt; principal User:CN=<userName>).",
                       enum=[*AUTHENTICATION, TLS], default=DEFAULT_AUTHENTICATION),
        "passwordSecret": obj("passwordSecret: the Secret key holding the password; absent: "
                              "the operator generates one into a Secret named after this "
                              "User (keys password and sasl.jaas.config).", {
                                  "name": string("name of the Secret."),
                                  "key": string("key in the Secret.", default="password"),
                              }, ("name",)),
    }),
    "authorization": obj("authorization: the ACLs of the user's principal; the operator "
                         "deletes the principal's ACLs not listed here.", {
        "type": string("type: simple (Kafka ACLs).", enum=["simple"], default="simple"),
        "acls": {"type": "array", "maxItems": 1000, "items": _ACL,
                 "description": "acls: the rules."},
    }),
    "quotas": obj("quotas: client quotas of the user (entity user=<userName>); a removed "
                  "field is removed in Kafka.",
                  {field: {"type": "number", "minimum": 0,
                           "description": f"{field} ({key}): {_QUOTA_DESCRIPTIONS[field]}."}
                   for field, key in QUOTA_KEYS.items()}),
}, ("broker",), **{"x-kubernetes-validations": [
    {"rule": "self.broker == oldSelf.broker", "message": "broker cannot be changed",
     "reason": "FieldValueForbidden"},
    {"rule": "(has(self.userName) ? self.userName : '') == "
             "(has(oldSelf.userName) ? oldSelf.userName : '')",
     "message": "userName cannot be changed", "reason": "FieldValueForbidden"},
]})

USER_STATUS: Final[Schema] = obj("Observed state, written by the operator.", {
    "conditions": conditions(),
    "observedGeneration": integer("The spec generation last reconciled."),
    "username": string("The Kafka user name (principal User:<username>)."),
    "secret": string("The Secret holding the user's password."),
    "mechanism": string("The SCRAM mechanism of the credential last applied."),
    "secretVersion": string("resourceVersion of the password Secret last applied."),
})

USER_CRD: Final = crd(
    "User", "users", "su", USER_SPEC, USER_STATUS,
    [{"name": "Username", "type": "string", "jsonPath": ".status.username"},
     {"name": "Broker", "type": "string", "jsonPath": ".spec.broker"},
     {"name": "Authentication", "type": "string", "jsonPath": ".spec.authentication.type"},
     ready_column(),
     {"name": "Reason", "type": "string",
      "jsonPath": '.status.conditions[?(@.type=="Ready")].reason', "priority": 1},
     age_column()],
    scale=False,
)
