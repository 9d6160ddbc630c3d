"""A warm sweep's server takes a new point's SETTINGS without a new process
(`AgentNode.reload_settings` over a real anchored local node and the real agent): the client's
next connection sees them, the pid stays; SETTINGS the agent refuses leave the ones it had and
fail in one line; a server started without a settings file is restarted, not reloaded."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.trial_request import TrialRequest
from controller.nodes.agent import AgentNode, ServerMount, ServerProcess
from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.errors import NodeError
from controller.nodes.node import Node


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[tuple[AgentNode, AgentNode, str]]:
    server = AgentNode(
        Node(AnchoredLocalTransport("server (local)")),
        sys.executable,
        str(tmp_path / "server-state"),
        trial_log=str(tmp_path / "server-trials.jsonl"),
    )
    client = AgentNode(Node(AnchoredLocalTransport("client (local)")), sys.executable, "/")
    site = server.build_site(str(tmp_path / "site"), seed=3, total_bytes=100_000)
    yield server, client, site
    server.stop_server(grace_s=5)
    client.node.close()
    server.node.close()


def _start(server: AgentNode, site: str, reloadable: bool) -> ServerProcess:
    mount = ServerMount("page", (("initial_window_size", 4096),), (), site)
    return server.start_server(mount=mount, host="127.0.0.1", port=0, reloadable=reloadable)


def _servers_settings(client: AgentNode, running: ServerProcess, trial_id: str) -> dict[str, int]:
    record = client.run_trial(TrialRequest(f"http://127.0.0.1:{running.port}/", trial_id=trial_id))
    assert record["ok"], record
    settings: dict[str, int] = record["peer_settings"]
    return settings


def test_new_settings_reach_the_next_connection_in_the_same_process(
    agents: tuple[AgentNode, AgentNode, str],
) -> None:
    server, client, site = agents
    running = _start(server, site, reloadable=True)
    pid = server.server_pid()
    assert _servers_settings(client, running, "before")["initial_window_size"] == 4096
    settings = (("initial_window_size", 65535), ("max_concurrent_streams", 8))
    running = server.reload_settings(running, settings)
    assert running.mount.settings == settings
    after = _servers_settings(client, running, "after")
    assert after["initial_window_size"] == 65535 and after["max_concurrent_streams"] == 8
    assert server.server_pid() == pid
    with pytest.raises(NodeError) as refused:
        server.reload_settings(running, (("initial_window_size", 2**31),))
    assert "outside RFC 9113's range" in str(refused.value) and "\n" not in str(refused.value)
    # The refusal changed nothing: the server still announces what it had.
    assert _servers_settings(client, running, "kept")["initial_window_size"] == 65535


def test_a_server_started_without_a_settings_file_is_not_reloaded(
    agents: tuple[AgentNode, AgentNode, str],
) -> None:
    server, _client, site = agents
    running = _start(server, site, reloadable=False)
    assert running.settings_file is None
    with pytest.raises(NodeError, match="not started reloadable"):
        server.reload_settings(running, (("initial_window_size", 65535),))
