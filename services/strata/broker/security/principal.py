"""Kafka principals: who a connection is, as ``User:<name>`` (Kafka's ``KafkaPrincipal``).

Pure. Owns the rules of Kafka's ``DefaultKafkaPrincipalBuilder``:

* a SASL listener: ``User:<SASL authorization id>`` once authenticated;
* an SSL listener with a client certificate: ``User:<subject DN>``, the DN in RFC 2253 form
  (``CN=alice,OU=eng,O=Strata``: most specific first, as Java's ``X500Principal.getName()``
  prints it — ``ssl.principal.mapping.rules=DEFAULT``);
* otherwise (PLAINTEXT, SSL without a client certificate): ``User:ANONYMOUS``.

The principal is what the authorizer (ACLs, a later slice) will check; nothing here grants
anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

USER_TYPE: Final = "User"
ANONYMOUS: Final = "User:ANONYMOUS"

# Python's ssl module names attributes by their long names; RFC 2253 uses these short ones.
_RFC2253_NAMES: Final[dict[str, str]] = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
_OIDS: Final[dict[str, str]] = {"emailAddress": "1.2.840.113549.1.9.1"}


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        edge = i in (0, len(value) - 1)
        if char in ',+"\\<>;' or (char == "#" and i == 0) or (char == " " and edge):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def rfc2253(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """``ssl.SSLSocket.getpeercert()["subject"]`` (outermost RDN first) as an RFC 2253 DN."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for name, value in rdn:
            short = _RFC2253_NAMES.get(name) or _OIDS.get(name) or name
            parts.append(f"{short}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def from_certificate(peercert: dict[str, object] | None) -> str:
    """The principal of a TLS peer: its subject DN, or ANONYMOUS without a certificate."""
    if not peercert:
        return ANONYMOUS
    subject = peercert.get("subject")
    if not isinstance(subject, tuple) or not subject:
        return ANONYMOUS
    return user(rfc2253(subject))
