"""The etcd store over TLS with client certificates, against the real etcd: an etcd started
with https client URLs, ``--client-cert-auth`` and ``--trusted-ca-file``; ``etcds://`` stores
read, write and watch through it; a client without a certificate, with one from another CA,
or not trusting etcd's certificate gets a ``StoreUnavailableError`` that says TLS (after a
short retry deadline), never a hang; unreadable PEM files fail at ``open_store``."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from strata.metadata import EventKind, StoreTls, StoreUnavailableError, open_store
from strata.metadata.etcd_store import EtcdStore
from strata.operator import ca_rotation, certificates, etcd_certs
from strata.operator.model import BrokerNames, BrokerSpec

from ..broker_process import create_user
from .etcd_process import EtcdProcess, EtcdTlsFiles, free_port, running_etcd
from .etcd_tls_certs import DAY, TlsSetup, make_tls
from .helpers import EventPump

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsSetup:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory, tls: TlsSetup) -> Iterator[EtcdProcess]:
    with running_etcd(tmp_path_factory.mktemp("etcd-tls"), tls.etcd) as process:
        yield process


async def test_reads_writes_and_watches_over_tls(tls_etcd: EtcdProcess, tls: TlsSetup) -> None:
    assert tls_etcd.url.startswith("etcds://")
    watching = open_store(tls_etcd.url, tls=tls.client)
    writing = open_store(tls_etcd.url, tls=tls.client)
    try:
        async with asyncio.timeout(20):
            _, start = await watching.list("/tls/")
            pump = EventPump(watching.watch("/tls/", from_revision=start))
            try:
                first = await writing.put("/tls/a", b"1")
                assert await writing.compare_and_set("/tls/a", b"2", version=first)
                entry = await watching.get("/tls/a")
                assert entry is not None and entry.value == b"2"
                assert await writing.delete("/tls/a")
                events = await pump.take(3)
                assert [e.kind for e in events] == [EventKind.PUT, EventKind.PUT, EventKind.DELETE]
            finally:
                await pump.close()
    finally:
        await watching.close()
        await writing.close()


async def _refused(etcd: EtcdProcess, store_tls: StoreTls) -> str:
    store = EtcdStore(
        (("127.0.0.1", etcd.client_port),), retry_deadline_s=1.0, tls=store_tls.read()
    )
    try:
        async with asyncio.timeout(15):
            with pytest.raises(StoreUnavailableError) as caught:
                await store.get("/tls/x")
    finally:
        await store.close()
    return str(caught.value)


async def test_a_client_without_a_certificate_is_refused(
    tls_etcd: EtcdProcess, tls: TlsSetup
) -> None:
    message = await _refused(tls_etcd, StoreTls(cafile=tls.client.cafile))
    assert "TLS" in message and "metadata.store.ssl.certfile" in message, message


async def test_a_client_certificate_from_another_ca_is_refused(
    tls_etcd: EtcdProcess, tls: TlsSetup
) -> None:
    message = await _refused(tls_etcd, tls.stranger)
    assert "TLS" in message, message


async def test_an_untrusted_server_certificate_is_refused(
    tls_etcd: EtcdProcess, tls: TlsSetup
) -> None:
    message = await _refused(tls_etcd, replace(tls.client, cafile=str(tls.other_ca)))
    assert "TLS" in message and "metadata.store.ssl.cafile" in message, message


async def test_a_plain_client_is_refused(tls_etcd: EtcdProcess) -> None:
    store = EtcdStore((("127.0.0.1", tls_etcd.client_port),), retry_deadline_s=1.0)
    try:
        async with asyncio.timeout(15):
            with pytest.raises(StoreUnavailableError):
                await store.get("/tls/x")
    finally:
        await store.close()


def test_unreadable_files_fail_at_open(tls: TlsSetup, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(ValueError, match=r"metadata\.store\.ssl\.cafile=.*nope\.pem: cannot read"):
        open_store("etcds://127.0.0.1:1", tls=replace(tls.client, cafile=missing))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ValueError, match="not a PEM file"):
        open_store("etcds://127.0.0.1:1", tls=replace(tls.client, keyfile=str(junk)))
    with pytest.raises(ValueError, match="not an etcds:// URL"):
        open_store("etcd://127.0.0.1:1", tls=tls.client)


async def test_the_operators_certificates_open_a_real_tls_etcd(tmp_path: Path) -> None:
    """The ``<broker>-etcd-certs`` server certificate and the broker's own ``tls.crt`` (both
    from the operator's planning code, as it writes them) work with the real etcd."""
    now = datetime.datetime.now(datetime.UTC)
    ca = ca_rotation.CaState({"ca.crt": (pair := certificates.new_ca("c", now, DAY)).cert,
                              "ca.key": pair.key})
    names = BrokerNames("events", "prod")
    spec = BrokerSpec.parse({"listeners": {"tls": {"port": 9093, "tls": True}},
                             "metadata": {"managed": True}}, "events")
    server = etcd_certs.plan({}, ca, names, spec, now).data
    broker = ca_rotation.plan_broker_certs({}, certificates.bundle(ca.trusted), ca.issuer, {},
                                           "events-broker", now, DAY, DAY / 2).data
    for name, text in [*(("etcd-" + k, v) for k, v in server.items()),
                       *(("broker-" + k, v) for k, v in broker.items())]:
        (tmp_path / name).write_text(text)
    files = EtcdTlsFiles(ca=tmp_path / "etcd-ca.crt", cert=tmp_path / "etcd-server.crt",
                         key=tmp_path / "etcd-server.key", client_cert=tmp_path / "broker-tls.crt",
                         client_key=tmp_path / "broker-tls.key")
    (tmp_path / "etcd").mkdir()
    with running_etcd(tmp_path / "etcd", files) as etcd:
        store = open_store(etcd.url, tls=StoreTls(str(tmp_path / "broker-ca.crt"),
                                                  str(tmp_path / "broker-tls.crt"),
                                                  str(tmp_path / "broker-tls.key")))
        try:
            async with asyncio.timeout(20):
                await store.put("/operator/x", b"1")
                entry = await store.get("/operator/x")
                assert entry is not None and entry.value == b"1"
        finally:
            await store.close()


async def test_failover_to_the_next_endpoint_keeps_tls(
    tls_etcd: EtcdProcess, tls: TlsSetup
) -> None:
    """The first endpoint is dead: the session's next client, on the next endpoint, is TLS."""
    url = f"etcds://127.0.0.1:{free_port()},127.0.0.1:{tls_etcd.client_port}"
    store = open_store(url, tls=tls.client)
    try:
        async with asyncio.timeout(20):
            await store.put("/tls/failover", b"1")
            entry = await store.get("/tls/failover")
            assert entry is not None and entry.value == b"1"
    finally:
        await store.close()


async def test_the_cli_reaches_a_tls_etcd_with_the_brokers_environment_names(
    tls_etcd: EtcdProcess, tls: TlsSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``strata users create --metadata-store etcds://...`` (the operator's entrypoint runs it)
    takes the TLS files from ``STRATA_METADATA_STORE_SSL_*``."""
    for name, value in (("CAFILE", tls.client.cafile), ("CERTFILE", tls.client.certfile),
                        ("KEYFILE", tls.client.keyfile)):
        monkeypatch.setenv(f"STRATA_METADATA_STORE_SSL_{name}", str(value))
    await asyncio.to_thread(create_user, "alice", "alice-secret", "--metadata-store",
                            tls_etcd.url)
    store = open_store(tls_etcd.url, tls=tls.client)
    try:
        async with asyncio.timeout(20):
            entries, _ = await store.list("/")
            assert any("alice" in e.key for e in entries)
    finally:
        await store.close()
