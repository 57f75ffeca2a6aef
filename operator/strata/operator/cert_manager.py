"""The cert-manager ``Certificate`` a Broker asks for when ``tls.certManager.issuerRef`` is set.

Pure. One ``cert-manager.io/v1`` Certificate ``<broker>-broker-certs`` whose Secret (same
name) has cert-manager's layout — ``tls.crt``, ``tls.key``, ``ca.crt`` — which is exactly what
the brokers mount from a user's ``tls.secretName``: so from the Secret on, nothing differs.
One certificate serves every broker (cert-manager writes one Secret per Certificate, and a
StatefulSet's pods share one template): its DNS names are the wildcard of the headless
Service (``*.<broker>-brokers.<ns>.svc``, covering every pod, so a scale-up re-issues
nothing), the bootstrap Service's names and ``tls.alternativeNames`` (IP addresses go to
``ipAddresses``). Subject ``CN=<broker>-broker,O=strata.dev``, the principal the operator's
own certificates carry. Renewal is cert-manager's (``duration``, ``renewBefore`` from
``tls.validityDays`` / ``tls.renewalDays``); a renewed Secret rolls the brokers through the
config hash (``secret_refs``), as any rotated Secret does.

Fields are cert-manager's documented ``Certificate`` spec (v1): ``secretName``, ``commonName``,
``subject.organizations``, ``dnsNames``, ``ipAddresses``, ``duration``, ``renewBefore``,
``usages``, ``privateKey`` (``algorithm``, ``size``, ``encoding``, ``rotationPolicy``),
``issuerRef`` (``name``, ``kind``, ``group``). ``CERTIFICATE_SCHEMA`` is our JSON schema of that
subset, written from cert-manager's API reference (no cert-manager CRD is vendored here); the
unit tests validate the built object against it.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Final

from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.tls_spec import generated_secret_name

API_VERSION: Final = "cert-manager.io/v1"
KIND: Final = "Certificate"
SUBJECT_ORGANIZATION: Final = "strata.dev"

Obj = dict[str, Any]


def broker_common_name(names: BrokerNames) -> str:
    return f"{names.name}-broker"


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def build_certificate(names: BrokerNames, spec: BrokerSpec) -> Obj:
    certs = spec.certificates
    if certs.issuer is None:
        raise ValueError("build_certificate needs tls.certManager.issuerRef")
    headless = names.service_dns(names.headless_service)
    bootstrap = names.service_dns(names.client_service)
    dns = [f"*.{headless}", f"*.{headless}.cluster.local", bootstrap,
           f"{bootstrap}.cluster.local", names.client_service,
           *(n for n in certs.alternative_names if not _is_ip(n))]
    ips = [n for n in certs.alternative_names if _is_ip(n)]
    secret = generated_secret_name(names.name)
    body: Obj = {
        "secretName": secret,
        "commonName": broker_common_name(names),
        "subject": {"organizations": [SUBJECT_ORGANIZATION]},
        "dnsNames": list(dict.fromkeys(dns)),
        "duration": f"{certs.validity_days * 24}h",
        "renewBefore": f"{certs.renewal_days * 24}h",
        "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
        "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8",
                       "rotationPolicy": "Always"},
        "issuerRef": {"name": certs.issuer.name, "kind": certs.issuer.kind,
                      "group": certs.issuer.group},
    }
    if ips:
        body["ipAddresses"] = ips
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": secret, "namespace": names.namespace,
                     "labels": {"app.kubernetes.io/name": "strata",
                                "app.kubernetes.io/instance": names.name,
                                "app.kubernetes.io/component": "broker",
                                "app.kubernetes.io/managed-by": "strata-operator"}},
        "spec": body,
    }


_STRING: Final = {"type": "string"}
_DURATION: Final = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
CERTIFICATE_SCHEMA: Final[Obj] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": KIND},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["secretName", "issuerRef"],
            "properties": {
                "secretName": _STRING,
                "commonName": {"type": "string", "maxLength": 64},
                "subject": {"type": "object", "additionalProperties": False, "properties": {
                    k: {"type": "array", "items": _STRING} for k in (
                        "organizations", "countries", "organizationalUnits", "localities",
                        "provinces", "streetAddresses", "postalCodes")}},
                "dnsNames": {"type": "array", "items": _STRING},
                "ipAddresses": {"type": "array", "items": _STRING},
                "uris": {"type": "array", "items": _STRING},
                "emailAddresses": {"type": "array", "items": _STRING},
                "duration": _DURATION,
                "renewBefore": _DURATION,
                "isCA": {"type": "boolean"},
                "usages": {"type": "array", "items": {"enum": [
                    "signing", "digital signature", "content commitment", "key encipherment",
                    "key agreement", "data encipherment", "cert sign", "crl sign",
                    "encipher only", "decipher only", "any", "server auth", "client auth",
                    "code signing", "email protection", "s/mime", "ipsec end system",
                    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
                    "microsoft sgc", "netscape sgc"]}},
                "privateKey": {"type": "object", "additionalProperties": False, "properties": {
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "encoding": {"enum": ["PKCS1", "PKCS8"]},
                    "size": {"type": "integer"},
                    "rotationPolicy": {"enum": ["Never", "Always"]}}},
                "issuerRef": {"type": "object", "additionalProperties": False,
                              "required": ["name"], "properties": {
                                  "name": _STRING, "kind": _STRING, "group": _STRING}},
            },
        },
    },
}
