"""``StoreTls``: the PEM files a broker uses to reach its etcd over TLS (``etcds://``).

Owns the ``metadata.store.ssl.*`` settings as one value and reading them. Kafka's ZooKeeper
client has ``zookeeper.ssl.*`` (JKS key/trust stores); ours are PEM files, as etcd's own
``--cacert/--cert/--key`` are:

* ``cafile``: the CA bundle that signed etcd's server certificate (unset: the system roots);
* ``certfile`` and ``keyfile``: this client's certificate chain and private key, for an etcd
  started with ``--client-cert-auth`` (both or neither).

Invariant: ``read()`` either returns every file's bytes or raises ``ValueError`` naming the
setting and the path, so a typo is one clear error at startup, never a retry loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CAFILE = "metadata.store.ssl.cafile"
CERTFILE = "metadata.store.ssl.certfile"
KEYFILE = "metadata.store.ssl.keyfile"


@dataclass(frozen=True, slots=True)
class StoreTls:
    """Paths of the PEM files (``None``: not configured)."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StoreTls:
        """From ``STRATA_METADATA_STORE_SSL_{CAFILE,CERTFILE,KEYFILE}``: the names a broker
        reads these settings by from its environment, for the ``strata`` CLI commands that
        open a store (``--metadata-store``)."""
        return cls(env.get("STRATA_METADATA_STORE_SSL_CAFILE") or None,
                   env.get("STRATA_METADATA_STORE_SSL_CERTFILE") or None,
                   env.get("STRATA_METADATA_STORE_SSL_KEYFILE") or None)

    @property
    def configured(self) -> bool:
        return any((self.cafile, self.certfile, self.keyfile))

    def read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(CA bundle, private key, certificate chain) as bytes, in the order gRPC's
        ``ssl_channel_credentials`` takes them."""
        if bool(self.certfile) != bool(self.keyfile):
            raise ValueError(f"{CERTFILE} and {KEYFILE} go together: set both or neither")
        return (
            _read(CAFILE, self.cafile),
            _read(KEYFILE, self.keyfile),
            _read(CERTFILE, self.certfile),
        )


def _read(setting: str, path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"{setting}={path}: cannot read: {exc.strerror or exc}") from exc
    if b"-----BEGIN " not in data:
        raise ValueError(f"{setting}={path}: not a PEM file")
    return data
