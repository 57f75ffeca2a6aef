"""Peer TLS between the managed etcd's members, against a real 3-member etcd on 127.0.0.1: the
``<broker>-etcd-certs`` data the operator plans (``etcd_certs.plan``: ``server.crt`` as peer
certificate, ``ca.crt``, and ``tls.crt`` the etcdctl/client certificate) with the operator's
peer flags (``etcd_tls.peer_flags``); a write through one member is read from another; the
peer port refuses a connection without a certificate or with one from another CA, and
accepts one from the cluster CA."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.metadata import StoreTls, open_store
from strata.operator import ca_rotation, certificates, etcd_certs, etcd_tls
from strata.operator.model import BrokerNames, BrokerSpec

from .etcd_process import EtcdProcess, EtcdTlsFiles

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DAY = datetime.timedelta(days=1)
MEMBERS = 3


@pytest.fixture
def tls_dir(tmp_path: Path) -> Path:
    """The Secret as the etcd pod mounts it (file name = data key), planned by the operator."""
    now = datetime.datetime.now(datetime.UTC)
    pair = certificates.new_ca("events cluster CA", now, DAY)
    ca = ca_rotation.CaState({"ca.crt": pair.cert, "ca.key": pair.key})
    spec = BrokerSpec.parse({"listeners": {"tls": {"port": 9093, "tls": True}},
                             "metadata": {"managed": True, "managedReplicas": MEMBERS}},
                            "events")
    directory = tmp_path / "etcd-certs"
    directory.mkdir()
    for key, text in etcd_certs.plan({}, ca, BrokerNames("events", "prod"), spec,
                                     now).data.items():
        (directory / key).write_text(text)
    other = certificates.new_ca("other CA", now, DAY)
    stranger = certificates.issue(other, "events-etcd", now, DAY, sans=["127.0.0.1"])
    (directory / "stranger.crt").write_text(stranger.cert)
    (directory / "stranger.key").write_text(stranger.key)
    return directory


@pytest.fixture
def cluster(tmp_path: Path, tls_dir: Path) -> Iterator[list[EtcdProcess]]:
    files = EtcdTlsFiles(ca=tls_dir / "ca.crt", cert=tls_dir / "server.crt",
                         key=tls_dir / "server.key", client_cert=tls_dir / "tls.crt",
                         client_key=tls_dir / "tls.key")
    members = []
    for i in range(MEMBERS):
        (tmp_path / f"m{i}").mkdir()
        members.append(EtcdProcess(tmp_path / f"m{i}", files, name=f"events-etcd-{i}",
                                   peer_tls=True))
    initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
    try:
        for member in members:
            member.initial_cluster = initial
            member.launch()
        for member in members:
            member.wait_healthy()
        yield members
    finally:
        for member in members:
            member.stop()


def peer_members(port: int, tls_dir: Path, cert: str | None) -> list[dict[str, Any]]:
    """GET /members on a member's peer port, presenting ``<cert>.crt`` (None: nothing)."""
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(tls_dir / f"{cert}.crt"), str(tls_dir / f"{cert}.key"))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/members", timeout=5,
                                context=context) as response:
        return list(json.loads(response.read()))


async def test_members_replicate_over_peer_tls_and_refuse_peers_without_the_cas_certificate(
    cluster: list[EtcdProcess], tls_dir: Path
) -> None:
    # the helper runs etcd with the operator's peer flags (its mount point -> the test dir)
    for member in cluster:
        assert member.process is not None
        args = member.process.args
        assert isinstance(args, list)
        for flag in etcd_tls.peer_flags():
            assert flag.replace(etcd_tls.ETCD_TLS_DIR, str(tls_dir)) in args
        assert f"--listen-peer-urls=https://127.0.0.1:{member.peer_port}" in args

    client = StoreTls(str(tls_dir / "ca.crt"), str(tls_dir / "tls.crt"), str(tls_dir / "tls.key"))
    writer, reader = open_store(cluster[0].url, tls=client), open_store(cluster[2].url, tls=client)
    try:
        async with asyncio.timeout(15):
            await writer.put("/peer-tls/x", b"through member 0")
            entry = await reader.get("/peer-tls/x")  # linearizable: a quorum over peer TLS
            assert entry is not None and entry.value == b"through member 0"
    finally:
        await writer.close()
        await reader.close()

    port = cluster[1].peer_port
    members = await asyncio.to_thread(peer_members, port, tls_dir, "tls")  # the CA's: accepted
    assert sorted(str(m["name"]) for m in members) == [f"events-etcd-{i}" for i in range(3)]
    for m in members:
        assert all(url.startswith("https://") for url in m["peerURLs"]), m
    for cert in (None, "stranger"):  # no certificate; a certificate from another CA
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)) as refused:
            await asyncio.to_thread(peer_members, port, tls_dir, cert)
        reason: object = refused.value
        if isinstance(reason, urllib.error.URLError):
            reason = reason.reason  # urlopen wraps the SSL error
        assert isinstance(reason, ssl.SSLError | ConnectionError), refused.value
    # and etcd says why it refused them (its log is written as it goes: poll)
    expected = ("tls: client didn't provide a certificate",
                "x509: certificate signed by unknown authority")
    deadline = time.monotonic() + 5
    while not all(e in cluster[1].log_path.read_text() for e in expected):
        assert time.monotonic() < deadline, cluster[1].log_tail()
        await asyncio.sleep(0.05)


def test_a_restart_with_https_peer_urls_leaves_the_recorded_peer_url_http(
    tmp_path: Path, tls_dir: Path
) -> None:
    """Why an etcd that predates TLS keeps plain peers: etcd keeps a member's peer URLs in its
    data dir and ignores ``--initial-advertise-peer-urls`` on a restart, so the other members
    would go on dialling ``http://`` (only ``etcdctl member update`` changes it)."""
    files = EtcdTlsFiles(ca=tls_dir / "ca.crt", cert=tls_dir / "server.crt",
                         key=tls_dir / "server.key", client_cert=tls_dir / "tls.crt",
                         client_key=tls_dir / "tls.key")
    (tmp_path / "m").mkdir()
    member = EtcdProcess(tmp_path / "m", files, name="events-etcd-0", peer_tls=False)
    try:
        member.start()
        member.stop()
        member.peer_tls = True  # what a roll to the peer-TLS template would do
        member.start()
        assert member.peer_url.startswith("https://")
        (recorded,) = peer_members(member.peer_port, tls_dir, "tls")
        assert recorded["peerURLs"] == [f"http://127.0.0.1:{member.peer_port}"]
    finally:
        member.stop()
