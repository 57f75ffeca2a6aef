"""Certificates for a TLS etcd in tests, made with the operator's own CA code
(``strata.operator.certificates``): one CA, etcd's server certificate for 127.0.0.1, a client
certificate, and a client certificate from another CA (which etcd must refuse)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from strata.metadata import StoreTls
from strata.operator import certificates

from .etcd_process import EtcdTlsFiles

DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class TlsSetup:
    etcd: EtcdTlsFiles
    client: StoreTls  # trusted CA + a client certificate etcd accepts
    other_ca: Path  # a CA that did not sign etcd's certificate
    stranger: StoreTls  # trusted CA + a client certificate from the other CA


def make_tls(directory: Path) -> TlsSetup:
    now = datetime.datetime.now(datetime.UTC)
    ca = certificates.new_ca("etcd-test-ca", now, DAY)
    other = certificates.new_ca("other-ca", now, DAY)
    server = certificates.issue(ca, "etcd", now, DAY, sans=["127.0.0.1", "localhost"])
    client = certificates.issue(ca, "broker", now, DAY, server=False)
    stranger = certificates.issue(other, "broker", now, DAY, server=False)

    def write(name: str, text: str) -> Path:
        path = directory / name
        path.write_text(text)
        return path

    ca_path, other_path = write("ca.pem", ca.cert), write("other-ca.pem", other.cert)
    client_cert, client_key = write("client.pem", client.cert), write("client.key", client.key)
    return TlsSetup(
        etcd=EtcdTlsFiles(
            ca=ca_path,
            cert=write("server.pem", server.cert),
            key=write("server.key", server.key),
            client_cert=client_cert,
            client_key=client_key,
        ),
        client=StoreTls(str(ca_path), str(client_cert), str(client_key)),
        other_ca=other_path,
        stranger=StoreTls(
            str(ca_path),
            str(write("stranger.pem", stranger.cert)),
            str(write("stranger.key", stranger.key)),
        ),
    )
