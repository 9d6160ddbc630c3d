"""HTTP/3's UDP reachability check (controller.nodes.udp_reach): the wording of each finding,
the probe's report, and the probe itself between real local nodes (no root needed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from controller.config import Config, load_config
from controller.config.model import NodeConfig
from controller.nodes.connect import connect
from controller.nodes.node import Node
from controller.nodes.udp_reach import (
    UdpReach,
    listen_port,
    listener_event,
    probe_udp,
    reach_of,
    udp_pairs,
)
from controller.rig import checks

CLIENT = NodeConfig(role="client", address="10.0.0.2")
SERVER = NodeConfig(role="server", host="pi-server", user="pi", address="0.0.0.0")


def _config(tmp_path: Path, *overrides: str) -> Config:
    path = tmp_path / "c.toml"
    path.write_text("")
    return load_config(path, list(overrides))


def test_only_configs_with_http3_trials_are_probed(tmp_path: Path) -> None:
    assert udp_pairs(_config(tmp_path)) == ()
    config = _config(tmp_path, "workload.protocol=h3")
    assert udp_pairs(config) == ((config.client, config.server),)
    swept = _config(tmp_path, "sweep.protocol=['h2','h3']")
    assert len(udp_pairs(swept)) == 1


def test_the_port_is_the_servers_as_a_sweep_takes_it() -> None:
    assert listen_port(SERVER) == 8443
    assert listen_port(replace(SERVER, http_port=9443)) == 9443
    assert listen_port(NodeConfig(role="server")) == 0  # local: a free one, as a local sweep's


def _base() -> UdpReach:
    return replace(UdpReach.of_pair(CLIENT, SERVER), port=8443)


def test_each_finding_is_one_line_naming_nodes_address_and_port() -> None:
    head = "client (local) -> server (pi@pi-server:22): HTTP/3 UDP 10.0.0.2:8443: "
    echo = reach_of(_base(), '{"outcome": "echo", "sent": 2, "round_trip_ns": 1500000}\n')
    assert echo.ok and echo.problem() is None
    assert echo.detail() == "UDP 10.0.0.2:8443: a 1200-byte datagram echoed in 1.50 ms"
    refused = reach_of(_base(), '{"outcome": "refused", "sent": 1}')
    assert refused.problem() == (
        head + "ICMP port unreachable, nothing listens there (the server's listener is on "
        "0.0.0.0:8443)"
    )
    silence = reach_of(_base(), 'noise\n{"outcome": "silence", "sent": 3}\n')
    assert silence.problem() == (
        head + "no answer to 3 datagrams of 1200 bytes in 3 s (dropped on the way there or back)"
    )
    error = reach_of(_base(), '{"outcome": "error", "sent": 0, "error": "No route (EHOSTUNREACH)"}')
    assert error.problem() == head + "No route (EHOSTUNREACH)"
    for reach in (refused, silence, error):
        problem = reach.problem()
        assert problem is not None and "\n" not in problem


def test_a_report_that_is_not_one_is_an_error() -> None:
    for report in ("", "Traceback ...", '{"sent": 1}', '{"outcome": "maybe", "sent": 1}'):
        found = reach_of(_base(), report)
        assert found.finding == "error"
        assert found.problem() is not None


def test_no_listener_and_not_probed() -> None:
    taken = replace(_base(), finding="no listener", error="[Errno 98] Address already in use")
    assert taken.problem() == (
        "client (local) -> server (pi@pi-server:22): HTTP/3 server (pi@pi-server:22): cannot "
        "listen on UDP 0.0.0.0:8443: [Errno 98] Address already in use"
    )
    skipped = UdpReach.of_pair(CLIENT, NodeConfig(role="server"), "not probed", "no Python")
    assert skipped.problem() is None  # the node's own check reports it
    assert skipped.detail() == "UDP 10.0.0.2 (a free port): not probed: no Python"


def test_the_listener_line() -> None:
    assert listener_event([]) is None
    assert listener_event(["nohup: ignoring input", '{"port": 8443}']) == {"port": 8443}
    assert listener_event(['{"error": "in use"}']) == {"error": "in use"}
    assert listener_event(['{"other": 1}', "[1, 2]"]) is None


def test_the_rig_verdicts() -> None:
    echo = replace(_base(), finding="echo", round_trip_ns=900_000)
    assert checks.udp_check(echo).status == "pass"
    for finding, words in (
        ("refused", "nodes.client.address"),
        ("silence", "ufw allow 8443/udp"),
        ("error", "ip route get 10.0.0.2"),
        ("no listener", "ss -ulpn 'sport = :8443'"),
    ):
        check = checks.udp_check(replace(_base(), finding=finding))  # type: ignore[arg-type]
        assert check.status == "fail"
        assert check.detail.startswith(f"{finding}: UDP ") or finding == "no listener"
        assert words in check.fix
    unprobed = checks.udp_check(UdpReach.of_pair(CLIENT, SERVER, "not probed", "x"))
    assert unprobed.status == "unavailable"


# --- the probe between real local nodes ----------------------------------------------------


@pytest.fixture
def local_nodes() -> Iterator[tuple[Node, Node]]:
    client, server = connect(NodeConfig(role="client")), connect(NodeConfig(role="server"))
    yield client, server
    client.close()
    server.close()


def test_a_local_server_echoes(local_nodes: tuple[Node, Node]) -> None:
    client, server = local_nodes
    found = probe_udp(client, NodeConfig(role="client"), server, NodeConfig(role="server"))
    assert found.finding == "echo", found
    assert found.port > 0 and found.datagrams_sent >= 1
    assert found.round_trip_ns is not None and found.round_trip_ns > 0


def test_an_address_where_nothing_listens_is_refused(local_nodes: tuple[Node, Node]) -> None:
    """The listener binds 127.0.0.1; the client sends to 127.0.0.2, this host too (all of
    127/8 is loopback), whose kernel answers with ICMP port unreachable."""
    client, server = local_nodes
    found = probe_udp(
        client,
        NodeConfig(role="client", address="127.0.0.2"),
        server,
        NodeConfig(role="server", address="127.0.0.1"),
    )
    assert found.finding == "refused", found
    assert found.problem() == (
        f"client (local) -> server (local): HTTP/3 UDP 127.0.0.2:{found.port}: ICMP port "
        f"unreachable, nothing listens there (the server's listener is on 127.0.0.1:{found.port})"
    )


def test_a_port_another_process_holds(local_nodes: tuple[Node, Node]) -> None:
    client, server = local_nodes
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        found = probe_udp(
            client, NodeConfig(role="client"), server, NodeConfig(role="server"), port=port
        )
    assert found.finding == "no listener", found
    assert f"cannot listen on UDP 127.0.0.1:{port}: " in (found.problem() or "")


def test_a_server_without_python_is_an_error_naming_it(local_nodes: tuple[Node, Node]) -> None:
    client, server = local_nodes
    broken = NodeConfig(role="server", python="/no/such/python")
    found = probe_udp(client, NodeConfig(role="client"), server, broken)
    assert found.finding == "error"
    assert "server (local): the UDP listener exited" in found.detail()
