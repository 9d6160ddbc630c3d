"""End to end over SSH into two network namespaces (tests.netns): `h2iot nodes deploy` then
`h2iot nodes check`, host keys on first contact, and an agent fetch across the data link.

The namespaces have no route out, so the node venvs are installed offline: `nodes deploy`
downloads the agent's dependencies on the controller (root namespace) for the node's platform
and installs them on the node with `pip --no-index` from the copied wheels.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent import __version__
from agent.trial_request import TrialRequest
from controller.config import load_config
from controller.nodes.agent import AgentNode, ServerMount
from controller.nodes.connect import connect
from tests.conftest import h2iot
from tests.netns import Testbed

pytest_plugins = ["tests.netns.fixtures"]

SITE_BYTES = 300_000


@dataclass(frozen=True)
class Deployed:
    config: Path
    wheelhouse: Path
    result: subprocess.CompletedProcess[str]


def write_config(testbed: Testbed, path: Path, known_hosts: Path) -> Path:
    lines = []
    for role, host in (("client", testbed.client), ("server", testbed.server)):
        lines += [
            f"[nodes.{role}]",
            f'host = "{host.address}"',
            f'user = "{host.user}"',
            f'key = "{host.key}"',
            f'known_hosts = "{known_hosts}"',
            'deploy_dir = "~/h2iot"',  # each node's HOME is its own directory
            f'address = "{testbed.server.data_address}"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def deployed(netns_testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    directory = tmp_path_factory.mktemp("nodes-netns")
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(
        f"{netns_testbed.client.known_hosts_line}\n{netns_testbed.server.known_hosts_line}\n"
    )
    config = write_config(netns_testbed, directory / "nodes.toml", known_hosts)
    wheelhouse = directory / "wheelhouse"
    result = h2iot("nodes", "deploy", str(config), "--wheelhouse", str(wheelhouse))
    return Deployed(config, wheelhouse, result)


def test_deploy_then_check_end_to_end(deployed: Deployed, netns_testbed: Testbed):
    assert deployed.result.returncode == 0, deployed.result.stderr
    assert deployed.result.stdout.count("created") == 2
    for host in (netns_testbed.client, netns_testbed.server):
        assert (host.home / "h2iot" / "venv" / "bin" / "h2iot-agent").exists()
    check = h2iot("nodes", "check", str(deployed.config), "--clock-samples", "50")
    assert check.returncode == 0, check.stdout + check.stderr
    for role, host in (("client", netns_testbed.client), ("server", netns_testbed.server)):
        (row,) = [line for line in check.stdout.splitlines() if f"{role} (" in line]
        assert f"{host.user}@{host.address}:22" in row
        assert __version__ in row
        assert " ms ± " in row
    print(deployed.result.stdout, check.stdout, sep="\n")
    again = h2iot("nodes", "deploy", str(deployed.config), "--wheelhouse", str(deployed.wheelhouse))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("reused") == 2


def test_unknown_hosts_are_refused_then_recorded(deployed: Deployed, tmp_path: Path):
    testbed_config = deployed.config.read_text()
    known_hosts = tmp_path / "new_known_hosts"
    config = tmp_path / "nodes.toml"
    config.write_text(
        testbed_config.replace(str(deployed.config.parent / "known_hosts"), str(known_hosts))
    )
    refused = h2iot("nodes", "check", str(config), "--clock-samples", "5")
    assert refused.returncode == 1
    errors = refused.stderr.strip().splitlines()
    assert len(errors) == 2
    assert all(e.startswith("h2iot: error: ") and "does not exist" in e for e in errors)
    recorded = h2iot("nodes", "check", str(config), "--clock-samples", "5", "--accept-new-host-key")
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.count("recorded new host key of ") == 2
    assert "SHA256:" in recorded.stdout
    assert sorted(known_hosts.read_text().splitlines()) == sorted(
        (deployed.config.parent / "known_hosts").read_text().splitlines()
    )


def test_a_changed_host_key_is_refused_by_the_cli(deployed: Deployed, tmp_path: Path):
    lines = (deployed.config.parent / "known_hosts").read_text().splitlines()
    client_name = lines[0].split()[0]
    server_key = " ".join(lines[1].split()[1:])
    known_hosts = tmp_path / "swapped_known_hosts"
    known_hosts.write_text(f"{client_name} {server_key}\n{lines[1]}\n")
    config = tmp_path / "nodes.toml"
    config.write_text(
        deployed.config.read_text().replace(
            str(deployed.config.parent / "known_hosts"), str(known_hosts)
        )
    )
    result = h2iot("nodes", "check", str(config), "--accept-new-host-key")
    assert result.returncode == 1
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith(f"h2iot: error: client (root@{client_name}:22): host key of ")
    assert "refusing to connect" in error


def test_agent_fetch_across_the_data_link(deployed: Deployed, netns_testbed: Testbed):
    assert deployed.result.returncode == 0, deployed.result.stderr
    # The data link is the client's direct route to the server; nothing routes elsewhere.
    route = netns_testbed.exec_in(
        "client", ["ip", "route", "get", netns_testbed.server.data_address]
    )
    assert " dev data0 " in route
    assert netns_testbed.exec_in("server", ["ip", "route", "show", "default"]) == ""

    config = load_config(deployed.config)
    server_node = connect(config.server)
    client_node = connect(config.client)
    server = AgentNode.from_config(server_node, config.server)
    client = AgentNode.from_config(client_node, config.client)
    try:
        site = server.build_site("~/site", seed=5, total_bytes=SITE_BYTES)
        running = server.start_server(
            mount=ServerMount("page", (("initial_window_size", 65535),), (), site),
            host=config.server.address,
            port=config.server.http_port,
        )
        record = client.run_trial(
            TrialRequest(
                f"http://{config.client.address}:{running.port}/",
                settings=(("initial_window_size", 8192),),
                trial_id="netns-1",
                timeout_s=60,
            )
        )
        assert record["ok"], record
        assert record["body_bytes"] == SITE_BYTES
        trial = server.trial_record("netns-1")
        assert trial["ok"]
        assert trial["sent"]["bytes"] >= SITE_BYTES
        for node in (server_node, client_node):
            offset = node.clock_offset(config.server.python, samples=50)
            assert abs(offset.wall_offset_ns) <= offset.uncertainty_ns
        assert server.stop_server() == "terminated"
    finally:
        server.stop_server(grace_s=5)
        server_node.close()
        client_node.close()
