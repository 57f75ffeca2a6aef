"""Network partitions for the fault campaign: brokers as separate hosts in network namespaces.

Owns the namespaces and links of one run (root only; ``ip netns`` and veth)::

      root namespace (clients, etcd)             hub namespace            broker namespaces
      sc-<id>  198.18.K.254/24  ── veth ──  r-<id> ┐
                                                   ├─ br0 (bridge)
                          b0 namespace: eth0 198.18.K.1/24 ── veth ── b0-<id> ┤
                          b1 namespace: eth0 198.18.K.2/24 ── veth ── b1-<id> ┤
                          ...                                                  ┘

One /24 of the benchmarking range 198.18.0.0/15 (RFC 2544) per run, chosen so that no
interface of the root namespace already has an address in it; these addresses exist only on
the links created here. The bridge lives in its own namespace, so the root namespace needs no
forwarding (no sysctl is touched). ``isolate(i)`` sets broker i's port on the bridge down: it
is cut off from the other brokers, from the metadata store (etcd, listening in the root
namespace on 198.18.K.254) and from the clients at once; ``heal`` sets every port up again.

With the SQLite store a partitioned broker would still reach the store (a file): network kinds
therefore run on etcd (``network_campaign``), which ``make etcd`` installs.

``close`` deletes the namespaces and the root-side veth, on success and on failure (the
namespaces are named ``strata-chaos-<id>-*`` so a leftover is recognisable). Only the campaign
thread calls into a ``Network``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from strata.cli.dev import etcd_command, free_port

if TYPE_CHECKING:
    from strata.cli.chaos_campaign import CampaignConfig, CampaignReport

BENCHMARK_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
ETCD_START_TIMEOUT_S = 30.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True,
                          timeout=30)


def netns_support() -> tuple[bool, str]:
    """(True, "") when brokers can run in namespaces here; else (False, the reason)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    if shutil.which("ip") is None:
        return False, "the `ip` command (iproute2) is missing"
    if shutil.which("etcd") is None:
        return False, ("network partitions run on an etcd metadata store and etcd is not "
                       "installed (make etcd)")
    probe = f"strata-chaos-probe-{secrets.token_hex(3)}"
    result = _ip("netns", "add", probe, check=False)
    if result.returncode != 0:
        return False, f"`ip netns add` failed: {result.stderr.strip()}"
    _ip("netns", "delete", probe, check=False)
    return True, ""


def _subnet_in_use(subnet: ipaddress.IPv4Network) -> bool:
    out = _ip("-4", "-o", "addr", "show").stdout
    for line in out.splitlines():
        for word in line.split():
            if "/" in word:
                with contextlib.suppress(ValueError):
                    if ipaddress.ip_interface(word).network.overlaps(subnet):
                        return True
    return False


class Network:
    """The namespaces, bridge and veth links of one run."""

    def __init__(self, brokers: int) -> None:
        self.id = secrets.token_hex(2)
        self.hub = f"strata-chaos-{self.id}-hub"
        self.namespaces = {i: f"strata-chaos-{self.id}-b{i}" for i in range(brokers)}
        self.root_link = f"sc-{self.id}"
        subnets: list[ipaddress.IPv4Network] = list(BENCHMARK_RANGE.subnets(new_prefix=24))
        start = secrets.randbelow(len(subnets))
        self.subnet = next(s for s in subnets[start:] + subnets[:start]
                           if not _subnet_in_use(s))
        hosts = list(self.subnet.hosts())
        self.root_address = str(hosts[-1])
        self.hosts = {i: str(hosts[i]) for i in range(brokers)}
        self.isolated: set[int] = set()
        self._created: list[str] = []

    def _port(self, node_id: int) -> str:
        return f"b{node_id}-{self.id}"

    def create(self) -> None:
        prefix = self.subnet.prefixlen
        _ip("netns", "add", self.hub)
        self._created.append(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        _ip("link", "add", self.root_link, "type", "veth", "peer", "name", f"r-{self.id}",
            "netns", self.hub)
        _ip("-n", self.hub, "link", "set", f"r-{self.id}", "master", "br0", "up")
        _ip("addr", "add", f"{self.root_address}/{prefix}", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")
        for i, ns in self.namespaces.items():
            _ip("netns", "add", ns)
            self._created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", self._port(i),
                "netns", self.hub)
            _ip("-n", self.hub, "link", "set", self._port(i), "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.hosts[i]}/{prefix}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def isolate(self, node_id: int) -> None:
        """Cut broker ``node_id`` off from everyone (its bridge port down)."""
        _ip("-n", self.hub, "link", "set", self._port(node_id), "down")
        self.isolated.add(node_id)

    def heal(self) -> None:
        for node_id in sorted(self.isolated):
            _ip("-n", self.hub, "link", "set", self._port(node_id), "up")
        self.isolated.clear()

    def close(self) -> None:
        """Delete the namespaces (their veths go with them) and the root-side link."""
        for ns in reversed(self._created):
            _ip("netns", "delete", ns, check=False)
        self._created.clear()
        _ip("link", "delete", self.root_link, check=False)


class EtcdOnNetwork:
    """A single-member etcd in the root namespace, reachable from the brokers' namespaces."""

    def __init__(self, workdir: Path, address: str) -> None:
        self.workdir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        client = f"http://{address}:{self.client_port}"
        # dev.etcd_command's loopback member, with client URLs on the bridge's address too
        # (etcd's flags: a later occurrence replaces an earlier one).
        self.command = [*etcd_command(workdir / "etcd", self.client_port, self.peer_port),
                        f"--listen-client-urls={client},http://127.0.0.1:{self.client_port}",
                        f"--advertise-client-urls={client}"]
        self.url = f"etcd://{address}:{self.client_port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "etcd.log").open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + ETCD_START_TIMEOUT_S
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not start; see {self.workdir / 'etcd.log'}")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.client_port}/health"
            with urllib.request.urlopen(url, timeout=1) as response:
                return b'"health":"true"' in response.read()
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # by PID
            self.process.wait(10)


def network_campaign(config: CampaignConfig,
                     say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
                     ) -> CampaignReport:
    """``run_campaign`` with every broker in its own namespace, on an etcd store."""
    from strata.cli.chaos_campaign import run_campaign

    network = Network(config.brokers)
    etcd: EtcdOnNetwork | None = None
    try:
        network.create()
        say(f"network namespaces {network.hub} + {len(network.namespaces)} brokers on "
            f"{network.subnet}")
        etcd = EtcdOnNetwork(config.workdir, network.root_address)
        etcd.start()
        return run_campaign(config, etcd.url, network, say)
    finally:
        if etcd is not None:
            etcd.stop()
        network.close()
