"""A rotated Secret rolls the pods that read it at start: ``secret_refs`` (which keys count) and
the hashes built from them (the StatefulSet's config hash, the admin pod template's secrets
hash), with Secrets read through ``broker.secret_digests``."""

from __future__ import annotations

import base64
from typing import Any

from strata.operator import admin_service, builders, secret_refs
from strata.operator.broker import secret_digests
from strata.operator.model import BrokerSpec

from .test_operator_security import NAMES, SECURE


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Secrets:
    """``Kube.read`` for Secrets from a dict; counts reads."""

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets
        self.reads: list[str] = []

    def read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert (kind, namespace) == ("Secret", NAMES.namespace)
        self.reads.append(name)
        data = self.secrets.get(name)
        return None if data is None else {"data": {k: b64(v) for k, v in data.items()}}


def secured() -> dict[str, dict[str, str]]:
    return {"events-tls": {"tls.crt": "SECRETVALUE-crt", "tls.key": "SECRETVALUE-key",
                           "ca.crt": "SECRETVALUE-ca"},
            "events-broker": {"pw": "SECRETVALUE-pw", "other": "SECRETVALUE-unrelated"},
            "events-admin-auth": {"auth.json": "SECRETVALUE-auth"},
            "events-admin-tls": {"tls.crt": "SECRETVALUE-acrt", "tls.key": "SECRETVALUE-akey"}}


def test_which_secret_keys_the_pods_read() -> None:
    spec = BrokerSpec.parse(SECURE)
    assert secret_refs.broker_secret_refs(spec) == (
        ("events-tls", ("ca.crt", "tls.crt", "tls.key")), ("events-broker", ("pw",)))
    assert secret_refs.admin_secret_refs(spec)[2:] == (
        ("events-admin-auth", ("auth.json",)), ("events-admin-tls", ("tls.crt", "tls.key")))
    plain = BrokerSpec.parse({"metadata": {"managed": True}})
    assert secret_refs.broker_secret_refs(plain) == secret_refs.admin_secret_refs(plain) == ()


def test_a_broker_without_secrets_keeps_its_hash() -> None:
    plain = BrokerSpec.parse({"metadata": {"managed": True}})
    kube = Secrets({})
    assert secret_digests(kube, NAMES, plain) == builders.SecretDigests("", "")
    assert kube.reads == []
    before = builders.digest(builders.build_pod_template(NAMES, plain),
                             builders.build_config_map(NAMES, plain)["data"])
    assert builders.config_hash(NAMES, plain) == before
    deployment = admin_service.build_admin_deployment(NAMES, plain)
    assert "annotations" not in deployment["spec"]["template"]["metadata"]


def test_rotating_a_secret_changes_the_hash_of_the_pods_that_read_it() -> None:
    spec = BrokerSpec.parse(SECURE)
    data = secured()
    kube = Secrets(data)
    first = secret_digests(kube, NAMES, spec)
    assert sorted(kube.reads) == sorted(data)  # each Secret read once
    assert first.broker and first.admin and first.broker != first.admin

    def digests_after(secret: str, key: str, value: str | None) -> builders.SecretDigests:
        changed = secured()
        if value is None:
            del changed[secret]
        else:
            changed[secret][key] = value
        return secret_digests(Secrets(changed), NAMES, spec)

    for secret, key in (("events-tls", "tls.key"), ("events-tls", "ca.crt"),
                        ("events-broker", "pw")):
        rotated = digests_after(secret, key, "rotated")
        assert rotated.broker != first.broker and rotated.admin != first.admin, (secret, key)
    assert digests_after("events-broker", "other", "rotated") == first  # not a key pods read
    admin_only = digests_after("events-admin-auth", "auth.json", '{"users": []}')
    assert admin_only.broker == first.broker and admin_only.admin != first.admin
    assert digests_after("events-tls", "", None).broker != first.broker  # missing counts too

    rotated = digests_after("events-broker", "pw", "rotated")
    hashes = [builders.build_stateful_set(NAMES, spec, None, d.broker)["spec"]["template"][
        "metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION] for d in (first, rotated)]
    assert hashes[0] != hashes[1]
    assert hashes == [builders.config_hash(NAMES, spec, d.broker) for d in (first, rotated)]
    template = admin_service.build_admin_deployment(NAMES, spec, rotated.admin)["spec"][
        "template"]["metadata"]
    assert template["annotations"] == {builders.SECRETS_HASH_ANNOTATION: rotated.admin}
    # Nothing of a Secret's value is in the objects, only the digest.
    objects = repr(builders.build_all(NAMES, spec, None, first))
    assert "SECRETVALUE-" not in objects and b64("SECRETVALUE-pw") not in objects


def test_admin_disabled_has_no_admin_digest() -> None:
    spec = BrokerSpec.parse({**SECURE, "admin": {"enabled": False}})
    assert secret_digests(Secrets(secured()), NAMES, spec).admin == ""
