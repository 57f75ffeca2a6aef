"""The campaign's network partitions (``strata.cli.chaos_netns``): a server in a namespace the
test made is reachable over the bridge, unreachable while isolated, reachable after healing,
and nothing is left behind. Where namespaces cannot be made (not root, no ``ip``, no etcd for
the campaign), the skip says why: the campaign then plays no network-partition fault."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from strata.cli.chaos_netns import Network, netns_support

pytestmark = pytest.mark.integration

SERVER = ("import socket,sys\n"
          "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind((sys.argv[1], 7777)); s.listen()\n"
          "while True:\n"
          "    c,_=s.accept(); c.sendall(b'hello'); c.close()\n")


def reachable(host: str, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, 7777), timeout=timeout) as conn:
            return conn.recv(5) == b"hello"
    except OSError:
        return False


def wait_reachable(host: str, deadline_s: float = 10.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if reachable(host):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.timeout(60)
def test_isolate_cuts_a_broker_namespace_off_and_heal_restores_it() -> None:
    ok, why = netns_support()
    if not ok:
        if os.environ.get("CI"):  # CI runs as root: network faults must be played there
            pytest.fail(f"network namespaces are unavailable in CI: {why}")
        pytest.skip(f"network-partition faults are not played on this machine: {why}")
    network = Network(brokers=1)
    server: subprocess.Popen[bytes] | None = None
    try:
        network.create()
        host = network.hosts[0]
        server = subprocess.Popen(["ip", "netns", "exec", network.namespaces[0],
                                   sys.executable, "-c", SERVER, host])
        assert wait_reachable(host), "server in the namespace not reachable over the bridge"
        network.isolate(0)
        assert not reachable(host, timeout=1.0), "still reachable while isolated"
        network.heal()
        assert wait_reachable(host), "not reachable again after healing"
    finally:
        if server is not None:
            server.kill()  # by PID
            server.wait(10)
        network.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"strata-chaos-{network.id}" not in listed
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert network.root_link not in links
