"""The ``User`` reconcile and deletion: the I/O shell around ``user_sync``.

Reconcile (on create/update/resume and on a timer, which repairs changes made directly in
Kafka): find the Broker (missing: ``BrokerNotFound``), check ownership
(``user_sync.conflict``: an older User or the Broker's inline ``users`` naming the same Kafka
user make this one ``ResourceConflict``; it never touches Kafka, not even on deletion), find
the password — the Secret key of
``authentication.passwordSecret``, else the Secret the operator generates and owns (named
after the User, keys ``password`` and ``sasl.jaas.config``; a Secret of that name the User
does not own is ``SecretConflict``, never overwritten) — ask Kafka what the user has, apply
``user_sync.decide``'s changes (AlterUserScramCredentials, CreateAcls/DeleteAcls,
AlterClientQuotas) over the Broker's inter-broker listener as the Broker's other reconciles
do (``broker.connect``), and patch status explicitly: ``Ready`` (``UserReady``,
``SecretNotFound``, ``SecretConflict``, ``BrokerNotFound``, ``ResourceConflict``,
``InvalidSpec``, ``KafkaError``),
``observedGeneration``, ``username``, ``secret``, and the applied ``mechanism`` and
``secretVersion`` (no password nor digest of one in status). Each change of the Ready reason
and each change applied is posted as an Event.

Deletion (kopf's finalizer): the user's credentials, every ACL of its principal and its
quotas are removed; the finalizer is released when that is done, when the Broker is gone or
being deleted, or (cluster unreachable) after ``STRATA_OPERATOR_TOPIC_DELETE_TIMEOUT``.
The generated Secret goes with the User (ownerReference; deleted here too, for API servers
without a garbage collector).
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import kopf

from strata.operator import conditions, events, tls_users, user_sync
from strata.operator.broker import bootstrap_for, client_config
from strata.operator.kafka import KafkaCluster, KafkaOperationError
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.operator.settings import SETTINGS
from strata.operator.user_spec import AclRule, UserSpec

logger = logging.getLogger(__name__)

USER_READY: Final = "UserReady"
SECRET_NOT_FOUND: Final = "SecretNotFound"
SECRET_CONFLICT: Final = "SecretConflict"
USER_CHANGED: Final = "UserChanged"
PASSWORD_BYTES: Final = 24  # 32 URL-safe characters


class UserCluster(Protocol):
    """What a User's reconcile asks of the cluster (``KafkaCluster`` is one)."""

    def scram_mechanisms(self, users: Sequence[str]) -> dict[str, frozenset[str]]: ...

    def upsert_scram_credential(self, user: str, mechanism: str, password: str,
                                iterations: int) -> None: ...

    def delete_scram_credential(self, user: str, mechanism: str) -> None: ...

    def acls(self, principal: str) -> frozenset[AclRule]: ...

    def create_acls(self, principal: str, rules: Sequence[AclRule]) -> None: ...

    def delete_acls(self, principal: str, rules: Sequence[AclRule] | None) -> None: ...

    def user_quotas(self, user: str) -> dict[str, float]: ...

    def alter_user_quotas(self, user: str, set_quotas: Mapping[str, float],
                          remove: Sequence[str]) -> None: ...


UserClusterFactory = Callable[[str, Mapping[str, str]], UserCluster]


def default_cluster(bootstrap: str, config: Mapping[str, str]) -> UserCluster:
    return KafkaCluster(bootstrap, timeout=SETTINGS.kafka_timeout, client_config=config)


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


# The Ready reason last posted as an Event per User (a timer pass may hold an older body).
_posted: dict[tuple[str, str, str], str] = {}


def _broker(kube: Kube, namespace: str, name: str) -> Obj | None:
    broker = kube.read("Broker", namespace, name)
    if broker is None or (broker.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return broker


def _connect(kube: Kube, namespace: str, broker: Obj, factory: UserClusterFactory
             ) -> UserCluster:
    names = BrokerNames(broker["metadata"]["name"], namespace)
    try:
        broker_spec = BrokerSpec.parse(broker.get("spec") or {}, names.name)
    except SpecError:
        broker_spec = BrokerSpec()
    return factory(bootstrap_for(names, broker_spec), client_config(kube, names, broker_spec))


def _conflict(kube: Kube, body: Mapping[str, Any], spec: UserSpec, broker: Obj) -> str | None:
    inline = [str(u.get("name")) for u in (broker.get("spec") or {}).get("users") or ()
              if isinstance(u, Mapping)]
    return user_sync.conflict(body, spec, kube.list("User", body["metadata"]["namespace"]),
                              inline)


def _password(kube: Kube, body: Mapping[str, Any], spec: UserSpec,
              generate: Callable[[], str]) -> tuple[str | None, str, str, str]:
    """(password or None, Secret resourceVersion, Secret name, problem reason + message)."""
    namespace = body["metadata"]["namespace"]
    if spec.password is not None:
        ref = spec.password
        secret = kube.read("Secret", namespace, ref.name)
        if secret is None:
            return None, "", ref.name, f"{SECRET_NOT_FOUND}:Secret {ref.name} not found"
        raw = (secret.get("data") or {}).get(ref.key)
        if not raw:
            return None, "", ref.name, (f"{SECRET_NOT_FOUND}:Secret {ref.name} has no (or an "
                                        f"empty) {ref.key!r}")
        return (base64.b64decode(raw).decode("utf-8"),
                str(secret["metadata"].get("resourceVersion") or ""), ref.name, "")
    name = user_sync.secret_name(body)
    secret = kube.read("Secret", namespace, name)
    if secret is None:
        secret = kube.create(user_sync.generated_secret(body, spec, generate()))
        logger.info("User %s/%s: password generated into Secret %s", namespace,
                    body["metadata"]["name"], name)
    elif not user_sync.owned_by(secret, body):
        return None, "", name, (f"{SECRET_CONFLICT}:Secret {name} exists and is not this "
                                "User's: set authentication.passwordSecret to use it")
    raw = (secret.get("data") or {}).get(user_sync.PASSWORD_KEY, "")
    return (base64.b64decode(raw).decode("utf-8") or None,
            str(secret["metadata"].get("resourceVersion") or ""), name, "")


def reconcile(body: Mapping[str, Any], kube: Kube,
              cluster_factory: UserClusterFactory = default_cluster,
              generate: Callable[[], str] = new_password) -> Obj:
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    old_status = body.get("status") or {}
    write = events.ready_status_writer(kube, "User", body, _posted,
                                       keep=("mechanism", "secretVersion"))

    try:
        spec = UserSpec.parse(body.get("spec") or {}, name)
    except SpecError as exc:
        return write(False, conditions.INVALID_SPEC, str(exc))
    broker = _broker(kube, namespace, spec.broker)
    if broker is None:
        return write(False, conditions.BROKER_NOT_FOUND,
                     f"Broker {namespace}/{spec.broker} does not exist", username=spec.user_name)
    problem = _conflict(kube, body, spec, broker)
    if problem is not None:
        return write(False, conditions.RESOURCE_CONFLICT, problem, username=spec.user_name)
    password: str | None = None
    version: str | None = None
    shown: Obj = {"username": spec.user_name}
    if spec.mechanism is not None:
        password, found_version, secret, problem = _password(kube, body, spec, generate)
        shown["secret"] = secret
        if problem:
            reason, _, message = problem.partition(":")
            return write(False, reason, message, **shown)
        version = found_version
    if spec.tls:
        secret, problem = tls_users.ensure_certificate(kube, body, spec, broker)
        shown["secret"] = secret
        if problem:
            reason, _, message = problem.partition(":")
            return write(False, reason, message, **shown)
    cluster = _connect(kube, namespace, broker, cluster_factory)
    try:
        observed = user_sync.Observed(
            mechanisms=cluster.scram_mechanisms([spec.user_name]).get(spec.user_name,
                                                                      frozenset()),
            acls=cluster.acls(spec.principal), quotas=cluster.user_quotas(spec.kafka_user))
        changes = user_sync.decide(spec, observed, version,
                                   old_status.get("secretVersion"),
                                   old_status.get("mechanism"))
        if changes.upsert and password is not None:
            cluster.upsert_scram_credential(spec.user_name, changes.upsert, password, 4096)
        for mechanism in changes.delete_mechanisms:
            cluster.delete_scram_credential(spec.user_name, mechanism)
        cluster.delete_acls(spec.principal, changes.delete_acls)
        cluster.create_acls(spec.principal, changes.create_acls)
        cluster.alter_user_quotas(spec.kafka_user, changes.set_quotas, changes.remove_quotas)
    except KafkaOperationError as exc:
        write(False, conditions.KAFKA_ERROR, str(exc), **shown)
        raise kopf.TemporaryError(str(exc), delay=SETTINGS.reconcile_interval) from None
    if spec.mechanism is not None:
        shown.update(mechanism=spec.mechanism, secretVersion=version)
    if not changes.empty:
        logger.info("User %s/%s (%s): %s", namespace, name, spec.principal, changes.summary())
        events.record(kube, body, events.NORMAL, USER_CHANGED, changes.summary())
    return write(True, USER_READY,
                 f"{spec.principal}: "
                 + (f"{spec.mechanism} credential from Secret {shown['secret']}, "
                    if spec.mechanism else
                    f"client certificate in Secret {shown['secret']}, " if spec.tls else
                    "no credential managed, ")
                 + f"{len(spec.acls)} ACLs, "
                 + (", ".join(f"{k}={v:g}" for k, v in sorted(spec.quotas.items()))
                    or "no quotas"), **shown)


def delete(body: Mapping[str, Any], kube: Kube, runtime_seconds: float,
           cluster_factory: UserClusterFactory = default_cluster,
           timeout: Callable[[], float] = lambda: SETTINGS.topic_delete_timeout) -> str:
    """Remove the user's credentials, ACLs and quotas from Kafka; returns what was done."""
    metadata = body["metadata"]
    namespace = metadata["namespace"]
    _posted.pop((namespace, metadata["name"], str(metadata.get("uid", ""))), None)
    try:
        spec = UserSpec.parse(body.get("spec") or {}, metadata["name"])
    except SpecError:
        return "released: invalid spec, nothing was applied"
    secret = kube.read("Secret", namespace, user_sync.secret_name(body))
    if spec.password is None and secret is not None and user_sync.owned_by(secret, body):
        kube.delete("Secret", namespace, user_sync.secret_name(body))
    broker = _broker(kube, namespace, spec.broker)
    if broker is None:
        return f"released: Broker {spec.broker} is gone"
    problem = _conflict(kube, body, spec, broker)
    if problem is not None:
        return f"released: {problem}"
    cluster = _connect(kube, namespace, broker, cluster_factory)
    try:
        mechanisms = cluster.scram_mechanisms([spec.user_name]).get(spec.user_name,
                                                                    frozenset())
        applied = (body.get("status") or {}).get("mechanism")
        for mechanism in sorted(mechanisms & {m for m in (spec.mechanism, applied) if m}):
            cluster.delete_scram_credential(spec.user_name, mechanism)
        cluster.delete_acls(spec.principal, None)
        quotas = cluster.user_quotas(spec.kafka_user)
        cluster.alter_user_quotas(spec.kafka_user, {}, sorted(quotas))
    except KafkaOperationError as exc:
        if runtime_seconds >= timeout():
            logger.warning("giving up removing user %r after %.0fs: %s", spec.user_name,
                           runtime_seconds, exc)
            return f"released: gave up removing {spec.user_name!r}: {exc}"
        raise kopf.TemporaryError(str(exc), delay=min(10.0, SETTINGS.reconcile_interval)) \
            from None
    return f"removed user {spec.user_name!r}: credentials, ACLs and quotas"
