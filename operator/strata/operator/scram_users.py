"""What a Broker's ``users`` need done in Kafka, and their entries in ``status.users``: pure.

The reconcile (``broker.py``) reads each user's password Secret and asks the cluster which SCRAM
mechanisms every user has (DescribeUserScramCredentials); ``plan`` decides, ``user_status``
reports. Rules:

* a listed user is upserted (AlterUserScramCredentials with a fresh salt) when its Secret's
  ``resourceVersion`` differs from the one last applied (``status.users[].secretVersion``: a
  rotated password is applied at the next pass; no password or digest of it is kept in
  status), when the Secret has no ``resourceVersion``, or when the cluster lacks the credential
  (deleted behind the operator's back: drift repaired);
* a user whose Secret or key is missing or empty is left alone and reported
  ``SecretNotFound``;
* a user that left the list is deleted only if the operator applied it (an entry with a
  ``secretVersion``): credentials made with ``strata users`` or by hand are never touched.
  Until the deletion succeeds the entry stays, reported ``DeletionPending``. A user that left
  the list to become the inter-broker user (``interBroker.username``) is handed over to the
  brokers, never deleted: that is how the inter-broker password is rotated without a pause
  (list the new user, then switch ``interBroker`` to it; see DESIGN.md).

``status.users`` entries: ``{name, mechanism, secretVersion?, conditions: [Ready]}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from strata.operator.conditions import ready_condition
from strata.operator.model import ScramUserSpec

UserKey = tuple[str, str]  # (name, mechanism)

CREDENTIAL_APPLIED: Final = "CredentialApplied"
SECRET_NOT_FOUND: Final = "SecretNotFound"
DELETION_PENDING: Final = "DeletionPending"
ITERATIONS: Final = 4096  # Kafka's kafka-configs / kafka-storage default


@dataclass(frozen=True, slots=True)
class UserSecret:
    """A user's password as read from its Secret: ``password`` None when it cannot be used,
    with the reason in ``problem``."""

    password: str | None
    version: str = ""
    problem: str = ""


@dataclass(frozen=True, slots=True)
class Upsert:
    user: ScramUserSpec
    password: str
    secret_version: str


@dataclass(frozen=True, slots=True)
class UsersPlan:
    upserts: tuple[Upsert, ...]
    deletions: tuple[UserKey, ...]
    up_to_date: tuple[UserKey, ...]  # applied before, Secret unchanged, credential present


def entry_key(entry: Mapping[str, Any]) -> UserKey:
    return str(entry.get("name", "")), str(entry.get("mechanism", ""))


def read_secret(secret: Mapping[str, Any] | None, user: ScramUserSpec,
                decoded: Mapping[str, str] | None) -> UserSecret:
    """``secret`` is the Secret object (None: missing); ``decoded`` its data, decoded."""
    ref = user.password
    if secret is None:
        return UserSecret(None, problem=f"Secret {ref.name} not found")
    password = (decoded or {}).get(ref.key, "")
    if not password:
        return UserSecret(None, problem=f"Secret {ref.name} has no (or an empty) {ref.key!r}")
    version = str((secret.get("metadata") or {}).get("resourceVersion") or "")
    return UserSecret(password, version)


def plan(users: Sequence[ScramUserSpec], secrets: Mapping[UserKey, UserSecret],
         previous: Sequence[Mapping[str, Any]], existing: Mapping[str, frozenset[str]],
         inter_broker_user: str | None = None) -> UsersPlan:
    """``existing``: SCRAM mechanisms per user name in the cluster (Describe)."""
    applied = {entry_key(e): applied_version(entry_key(e), previous) for e in previous}
    upserts, current = [], []
    for user in users:
        secret = secrets[user.key]
        if secret.password is None:
            continue
        unchanged = bool(secret.version) and applied.get(user.key) == secret.version
        if unchanged and user.mechanism in existing.get(user.name, frozenset()):
            current.append(user.key)
        else:
            upserts.append(Upsert(user, secret.password, secret.version))
    return UsersPlan(tuple(upserts), removed(users, previous, inter_broker_user),
                     tuple(current))


def removed(users: Sequence[ScramUserSpec], previous: Sequence[Mapping[str, Any]],
            inter_broker_user: str | None = None) -> tuple[UserKey, ...]:
    """Users the operator applied (``secretVersion`` in their entry) that left the list, but
    not one that became the inter-broker user."""
    wanted = {user.key for user in users}
    return tuple(entry_key(e) for e in previous
                 if "secretVersion" in e and entry_key(e) not in wanted
                 and entry_key(e)[0] != inter_broker_user)


def user_status(key: UserKey, ready: bool, reason: str, message: str,
                secret_version: str | None, generation: int | None,
                previous: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``status.users`` entry; ``lastTransitionTime`` kept while Ready does not change.
    ``secret_version`` None: never applied (the entry marks no credential of ours)."""
    before = next((e for e in previous if entry_key(e) == key), {})
    entry: dict[str, Any] = {"name": key[0], "mechanism": key[1]}
    if secret_version is not None:
        entry["secretVersion"] = secret_version
    entry["conditions"] = [ready_condition(ready, reason, message, generation,
                                           before.get("conditions") or ())]
    return entry


def applied_version(key: UserKey, previous: Sequence[Mapping[str, Any]]) -> str | None:
    """The Secret version last applied for ``key`` (None: the operator never applied it)."""
    for entry in previous:
        if entry_key(entry) == key and "secretVersion" in entry:
            return str(entry["secretVersion"])
    return None
