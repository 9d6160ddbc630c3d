"""HTTP/3's UDP check across a real data link: two SSH nodes in network namespaces
(tests.netns), the client sending to the server's address on the link. `h2iot nodes check`
passes, then, with the server's way back to the client blackholed, reports the silence in
one line and exits 1. The nodes run this installation's interpreter (same file system), so
nothing is deployed."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.config import load_config
from controller.nodes.connect import connect
from controller.nodes.udp_reach import probe_udp
from controller.rig import checks
from tests.conftest import h2iot
from tests.netns import Testbed

pytest_plugins = ["tests.netns.fixtures"]


@pytest.fixture(scope="module")
def h3_config(netns_testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("udp-netns")
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(
        f"{netns_testbed.client.known_hosts_line}\n{netns_testbed.server.known_hosts_line}\n"
    )
    lines = ["[workload]", 'protocol = "h3"']
    for role, host in (("client", netns_testbed.client), ("server", netns_testbed.server)):
        lines += [
            f"[nodes.{role}]",
            f'host = "{host.address}"',
            f'user = "{host.user}"',
            f'key = "{host.key}"',
            f'known_hosts = "{known_hosts}"',
            f'python = "{sys.executable}"',
            f'address = "{netns_testbed.server.data_address}"',
        ]
    path = directory / "h3.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def blocked_way_back(netns_testbed: Testbed) -> Iterator[None]:
    """The server's replies to the client's data address go nowhere (a blackhole route): its
    datagrams arrive, nothing comes back, and no ICMP says why."""
    route = ["ip", "route", "add", "blackhole", f"{netns_testbed.client.data_address}/32"]
    netns_testbed.exec_in("server", route)
    yield
    netns_testbed.exec_in("server", ["ip", "route", "del", *route[3:]])


def test_nodes_check_reaches_the_server_over_the_data_link(
    h3_config: Path, netns_testbed: Testbed
) -> None:
    result = h2iot("nodes", "check", str(h3_config), "--clock-samples", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    address = netns_testbed.server.data_address
    (row,) = [line for line in result.stdout.splitlines() if "echo: UDP" in line]
    assert f"echo: UDP {address}:8443: a 1200-byte datagram echoed in " in row


@pytest.mark.slow  # 3 s of silence per check, and two of them
def test_silence_is_reported_in_one_line(
    h3_config: Path, netns_testbed: Testbed, blocked_way_back: None
) -> None:
    result = h2iot("nodes", "check", str(h3_config), "--clock-samples", "5")
    assert result.returncode == 1, result.stdout + result.stderr
    (error,) = result.stderr.splitlines()
    address = re.escape(f"{netns_testbed.server.data_address}:8443")
    assert re.fullmatch(
        rf"h2iot: error: client \(root@[\d.]+:22\) -> server \(root@[\d.]+:22\): HTTP/3 UDP "
        rf"{address}: no answer to 3 datagrams of 1200 bytes in 3 s \(dropped on the way there "
        rf"or back\)",
        error,
    ), error
    # rig check's verdict on the same finding, with where to look.
    config = load_config(h3_config)
    client, server = connect(config.client), connect(config.server)
    try:
        found = probe_udp(client, config.client, server, config.server)
    finally:
        client.close()
        server.close()
    check = checks.udp_check(found)
    assert (check.status, found.finding) == ("fail", "silence")
    assert "ufw allow 8443/udp" in check.fix
