"""What a ``User`` needs done in Kafka, decided from what Kafka has: pure, no I/O.

The reconcile (``user.py``) reads the password (its Secret, or the Secret the operator
generated), asks the cluster for the user's SCRAM mechanisms (DescribeUserScramCredentials),
the ACLs of its principal (DescribeAcls) and its quotas (DescribeClientQuotas, entity
``user=<name>``); ``decide`` says what to change. Rules (the User owns its principal, as
Strimzi's KafkaUser does):

* credential: upserted (a fresh salt) when the password Secret's ``resourceVersion`` differs
  from the one last applied (``status.secretVersion``), or Kafka lacks it (drift); a
  credential of the mechanism applied before and no longer wanted is deleted;
* ACLs: every rule of the spec that Kafka lacks is created; every ACL of the principal that
  the spec does not list is deleted (one made by hand for this principal included);
* quotas: every key of the spec whose value differs is set; every other key the user has is
  removed.

Ownership (``conflict``): one Kafka user has one owner. Two Users of one Broker naming the
same user: the older (``creationTimestamp``, then name) owns it, the newer is
``ResourceConflict`` and never touches Kafka, not even on deletion; a user the Broker lists
inline (``spec.users``) belongs to the Broker.

``generated_secret`` builds the Secret holding a generated password (Strimzi's layout:
``password`` and ``sasl.jaas.config``), the password given by the caller (randomness is
injected, so this stays pure).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from strata.operator.user_spec import AclRule, UserSpec

PASSWORD_KEY: Final = "password"
JAAS_KEY: Final = "sasl.jaas.config"
USER_LABEL: Final = "strata.dev/user"
MANAGED_BY: Final = "strata-operator"


@dataclass(frozen=True, slots=True)
class Observed:
    """What Kafka has for the user."""

    mechanisms: frozenset[str]
    acls: frozenset[AclRule]
    quotas: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class UserChanges:
    upsert: str | None  # the mechanism whose credential to (re)set
    delete_mechanisms: tuple[str, ...]
    create_acls: tuple[AclRule, ...]
    delete_acls: tuple[AclRule, ...]
    set_quotas: Mapping[str, float]
    remove_quotas: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.upsert or self.delete_mechanisms or self.create_acls
                    or self.delete_acls or self.set_quotas or self.remove_quotas)

    def summary(self) -> str:
        parts = []
        if self.upsert:
            parts.append(f"{self.upsert} credential set")
        if self.delete_mechanisms:
            parts.append(f"{', '.join(self.delete_mechanisms)} credential deleted")
        if self.create_acls:
            parts.append(f"{len(self.create_acls)} ACLs created")
        if self.delete_acls:
            parts.append(f"{len(self.delete_acls)} ACLs deleted")
        if self.set_quotas or self.remove_quotas:
            parts.append("quotas " + ", ".join(
                [f"{k}={v:g}" for k, v in sorted(self.set_quotas.items())]
                + [f"{k} removed" for k in self.remove_quotas]))
        return "; ".join(parts) or "nothing to change"


def decide(spec: UserSpec, observed: Observed, secret_version: str | None,
           applied_version: str | None, applied_mechanism: str | None) -> UserChanges:
    """``secret_version``: the password Secret's resourceVersion now (None: no password to
    apply); ``applied_*``: what ``status`` says was applied last."""
    upsert = None
    if spec.mechanism is not None and secret_version is not None and (
            not secret_version or secret_version != applied_version
            or spec.mechanism != applied_mechanism
            or spec.mechanism not in observed.mechanisms):
        upsert = spec.mechanism
    stale = () if applied_mechanism in (None, spec.mechanism) else (applied_mechanism,)
    delete_mechanisms = tuple(m for m in stale if m in observed.mechanisms)
    wanted_quotas = dict(spec.quotas)
    return UserChanges(
        upsert=upsert,
        delete_mechanisms=delete_mechanisms,
        create_acls=tuple(sorted(spec.acls - observed.acls)),
        delete_acls=tuple(sorted(observed.acls - spec.acls)),
        set_quotas={k: v for k, v in sorted(wanted_quotas.items())
                    if observed.quotas.get(k) != v},
        remove_quotas=tuple(sorted(k for k in observed.quotas if k not in wanted_quotas)),
    )


def conflict(me: Mapping[str, Any], spec: UserSpec, others: Sequence[Mapping[str, Any]],
             broker_users: Sequence[str]) -> str | None:
    """Why ``me`` may not manage ``spec.user_name`` (None: it owns it). ``others``: the other
    User objects of the namespace; ``broker_users``: the Broker's inline user names."""
    if spec.user_name in broker_users:
        return (f"user {spec.user_name!r} is listed in Broker {spec.broker}'s users, which "
                "manage it")

    def key(body: Mapping[str, Any]) -> tuple[str, str]:
        metadata = body.get("metadata") or {}
        return str(metadata.get("creationTimestamp") or "9999"), str(metadata.get("name", ""))

    for other in sorted(others, key=key):
        metadata, raw = other.get("metadata") or {}, other.get("spec") or {}
        if metadata.get("name") == me["metadata"]["name"] or metadata.get("deletionTimestamp"):
            continue
        name = str(raw.get("userName") or metadata.get("name", ""))
        if raw.get("broker") == spec.broker and name == spec.user_name and key(other) < key(me):
            return (f"user {spec.user_name!r} is managed by User {metadata.get('namespace')}/"
                    f"{metadata.get('name')} (the older one)")
    return None


def jaas_config(mechanism: str, user: str, password: str) -> str:
    """The client's ``sasl.jaas.config`` line for a SCRAM login (Kafka's ScramLoginModule)."""
    del mechanism  # one login module serves both SCRAM mechanisms
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{escaped}";')


def secret_name(user_body: Mapping[str, Any]) -> str:
    """The generated Secret is named after the User resource (Strimzi's rule)."""
    return str(user_body["metadata"]["name"])


def generated_secret(user_body: Mapping[str, Any], spec: UserSpec, password: str
                     ) -> dict[str, Any]:
    """The Secret holding a generated password, owned by the User (garbage-collected with it)."""
    metadata = user_body["metadata"]
    data = {PASSWORD_KEY: password,
            JAAS_KEY: jaas_config(spec.mechanism or "", spec.user_name, password)}
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": secret_name(user_body), "namespace": metadata["namespace"],
            "labels": {USER_LABEL: str(metadata["name"]),
                       "app.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [{"apiVersion": user_body["apiVersion"], "kind": "User",
                                 "name": metadata["name"], "uid": metadata["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "data": {k: base64.b64encode(v.encode("utf-8")).decode("ascii")
                 for k, v in data.items()},
    }


def owned_by(secret: Mapping[str, Any], user_body: Mapping[str, Any]) -> bool:
    uid = user_body["metadata"].get("uid")
    return any(ref.get("uid") == uid and ref.get("kind") == "User"
               for ref in (secret.get("metadata") or {}).get("ownerReferences") or ())
