"""``etcds://`` parsing, ``StoreTls`` reading, and the pin check on aetcd's ``connect`` that
``TlsClient.connect`` replaces (if aetcd changes it, this fails before production does)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
from pathlib import Path

import aetcd
import pytest

from strata.metadata import EtcdUrl, StoreTls, parse_store_url
from strata.metadata.etcd_tls import TlsClient

PEM = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"


def test_etcds_is_etcd_over_tls() -> None:
    assert parse_store_url("etcds://h1,h2:12379") == EtcdUrl(
        (("h1", 2379), ("h2", 12379)), tls=True
    )
    assert parse_store_url("etcd://h1").tls is False  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"etcd\[s\]://host:port"):
        parse_store_url("etcds://h1/path")


def test_store_tls_reads_all_files_or_names_the_bad_one(tmp_path: Path) -> None:
    for name in ("ca", "cert", "key"):
        (tmp_path / name).write_bytes(PEM)
    tls = StoreTls(str(tmp_path / "ca"), str(tmp_path / "cert"), str(tmp_path / "key"))
    assert tls.configured and tls.read() == (PEM, PEM, PEM)
    assert StoreTls(cafile=str(tmp_path / "ca")).read() == (PEM, None, None)
    assert not StoreTls().configured and StoreTls().read() == (None, None, None)
    with pytest.raises(ValueError, match="set both or neither"):
        StoreTls(certfile=str(tmp_path / "cert")).read()
    with pytest.raises(ValueError, match=r"metadata\.store\.ssl\.cafile=.*: cannot read"):
        StoreTls(cafile=str(tmp_path / "absent")).read()


def test_aetcd_connect_is_still_the_shape_tls_client_replaces() -> None:
    """TlsClient.connect re-does aetcd 1.0.0's connect with a secure channel; a different
    aetcd must be re-read (and this test updated) before the override is trusted."""
    assert importlib.metadata.version("aetcd") == "1.0.0"
    source = inspect.getsource(aetcd.Client.connect)
    assert "rpc.insecure_channel(target, options=self._options.items())" in source
    stubs = ["kvstub", "clusterstub", "leasestub", "maintenancestub"]
    for line in (*(f"self.{s} = rpc." for s in stubs), "self._watcher = watcher.Watcher("):
        assert line in source, line
    attrs = inspect.getsource(aetcd.Client._init_channel_attrs)
    assert set(stubs) | {"channel", "metadata", "auth_stub", "_watcher"} == {
        word.split(" = ")[0].strip().removeprefix("self.")
        for word in attrs.splitlines() if " = " in word
    }


async def test_tls_client_opens_a_secure_channel_with_every_stub() -> None:
    client = TlsClient(host="127.0.0.1", port=1, options={}, pems=(None, None, None))
    await client.connect()
    try:
        assert client.channel is not None and client._connected.is_set()
        assert all(getattr(client, s) is not None
                   for s in ("kvstub", "clusterstub", "leasestub", "maintenancestub", "_watcher"))
    finally:
        await asyncio.wait_for(client.close(), 5)
    assert client.channel is None


def test_store_tls_from_the_brokers_environment_names() -> None:
    env = {"STRATA_METADATA_STORE_SSL_CAFILE": "/ca", "STRATA_METADATA_STORE_SSL_CERTFILE": "/c",
           "STRATA_METADATA_STORE_SSL_KEYFILE": "/k", "OTHER": "x"}
    assert StoreTls.from_env(env) == StoreTls("/ca", "/c", "/k")
    assert StoreTls.from_env({}) == StoreTls()
