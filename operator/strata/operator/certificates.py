"""X.509 material the operator makes itself: CAs, broker and client certificates, as PEM text.

Pure apart from key generation (fresh randomness is the point of a key): no I/O, no clock —
every function that dates a certificate takes ``now``. Built on the ``cryptography`` package.

Keys are ECDSA P-256 (instant to generate, accepted by librdkafka, Python's ``ssl`` and Java);
certificates are X.509 v3 signed with SHA-256:

* a CA (``new_ca``): self-signed, ``basicConstraints CA:TRUE, pathlen 0``, ``keyCertSign``;
* a leaf (``issue``): ``CA:FALSE``, ``digitalSignature``, extended key usage server and/or
  client auth, subject alternative names (DNS names, and IP addresses for entries that parse
  as one), signed by the given CA, never valid past the CA itself.

A trust bundle (``ca.crt`` with more than one CA, during a CA rotation) is PEM blocks one after
the other (``bundle`` / ``split_bundle``). ``needs_renewal`` is the one renewal rule: renew
when ``now`` is within ``renewal`` of ``notAfter``.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION: Final = "strata.dev"
PEM_END: Final = "-----END CERTIFICATE-----"
# Backdating absorbs clock skew between the operator and the peers that verify.
BACKDATE: Final = datetime.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, PEM text (key in PKCS#8, unencrypted)."""

    cert: str
    key: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _name(common_name: str, organization: str | None) -> x509.Name:
    """Organization first in DER order (as cert-manager and openssl write it), so the RFC
    2253 form, which lists the last RDN first, reads ``CN=<name>,O=strata.dev``."""
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def load(cert_pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(cert_pem.encode())


def new_ca(common_name: str, now: datetime.datetime, validity: datetime.timedelta) -> KeyPair:
    """A self-signed CA valid from ``now`` (backdated by ``BACKDATE``) for ``validity``."""
    key = _key()
    name = _name(common_name, ORGANIZATION)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(ca: KeyPair, common_name: str, now: datetime.datetime,
          validity: datetime.timedelta, *, sans: Sequence[str] = (),
          organization: str | None = ORGANIZATION, server: bool = True,
          client: bool = True) -> KeyPair:
    """A leaf certificate for ``common_name`` signed by ``ca``; valid for ``validity`` but
    never past the CA's own ``notAfter``. ``organization=None`` leaves the subject ``CN=...``
    alone (a TLS user's principal is then ``User:CN=<name>``)."""
    ca_cert = load(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key made by this module")
    key = _key()
    usages = [*([ExtendedKeyUsageOID.SERVER_AUTH] if server else []),
              *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])]
    builder = (x509.CertificateBuilder()
               .subject_name(_name(common_name, organization))
               .issuer_name(ca_cert.subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE)
               .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(
                   digital_signature=True, content_commitment=False, key_encipherment=False,
                   data_encipherment=False, key_agreement=False, key_cert_sign=False,
                   crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(n) for n in dict.fromkeys(sans)]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def not_after(cert_pem: str) -> datetime.datetime:
    return load(cert_pem).not_valid_after_utc


def needs_renewal(cert_pem: str, now: datetime.datetime,
                  renewal: datetime.timedelta) -> bool:
    """The one renewal rule: ``now`` is within ``renewal`` of the certificate's end."""
    return now >= not_after(cert_pem) - renewal


def issued_by(cert_pem: str, ca_pem: str) -> bool:
    """Whether ``ca_pem`` signed ``cert_pem`` (its signature checks out with the CA's key)."""
    cert, ca_cert = load(cert_pem), load(ca_pem)
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def sans_of(cert_pem: str) -> list[str]:
    """The certificate's DNS and IP subject alternative names, as text."""
    try:
        ext = load(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [*ext.value.get_values_for_type(x509.DNSName),
            *(str(ip) for ip in ext.value.get_values_for_type(x509.IPAddress))]


def subject_of(cert_pem: str) -> str:
    """The subject in RFC 4514 form (``CN=alice`` / ``CN=b-broker,O=strata.dev``): Kafka's
    ``ssl.principal.mapping.rules=DEFAULT`` principal is ``User:`` and this."""
    return load(cert_pem).subject.rfc4514_string()


def bundle(cas: Iterable[str]) -> str:
    """Several PEM certificates as one trust bundle (duplicates dropped, order kept)."""
    return "".join(dict.fromkeys(c.strip() + "\n" for c in cas if c.strip()))


def split_bundle(text: str) -> list[str]:
    """The PEM certificates of a bundle, each ending with a newline."""
    return [block.strip() + "\n" + PEM_END + "\n" for block in text.split(PEM_END)
            if block.strip()]
