"""Test PKI made with the ``openssl`` CLI: CAs, a broker certificate, client certificates.

Owns nothing beyond the files it writes under the test's temporary directory. Each certificate
is a fresh RSA-2048 key signed by its CA for one day; the broker's carries
``subjectAltName=IP:127.0.0.1,DNS:localhost`` so clients (and followers, whose
``ssl.endpoint.identification.algorithm`` is https) verify it by host. ``Pki.issue`` returns
the paths of the certificate, the key, and a PEM holding both (a Kafka PEM keystore file).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    keystore: Path  # cert + key in one PEM file (ssl.keystore.location)


class Pki:
    """One CA under ``directory``; ``issue`` signs certificates with it."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_key = directory / f"{name}-ca.key"
        self.ca_cert = directory / f"{name}-ca.pem"
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", f"/CN={name} test CA", "-keyout", str(self.ca_key),
                 "-out", str(self.ca_cert))

    def issue(self, name: str, subject: str, *, server: bool = False) -> Issued:
        key = self.directory / f"{name}.key"
        csr = self.directory / f"{name}.csr"
        cert = self.directory / f"{name}.pem"
        ext = self.directory / f"{name}.ext"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", str(key), "-out", str(csr))
        lines = ["basicConstraints=CA:FALSE"]
        if server:
            lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
        ext.write_text("\n".join(lines) + "\n")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.ca_cert),
                 "-CAkey", str(self.ca_key), "-CAcreateserial", "-days", "1",
                 "-extfile", str(ext), "-out", str(cert))
        keystore = self.directory / f"{name}-keystore.pem"
        keystore.write_text(cert.read_text() + key.read_text())
        return Issued(cert, key, keystore)
