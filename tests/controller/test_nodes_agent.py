"""`AgentNode` on a local node: the real agent CLI as server and client processes."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import __version__
from controller.nodes import (
    AgentNode,
    CommandFailedError,
    LocalTransport,
    Node,
    NodeError,
)

SITE_BYTES = 150_000


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentNode]:
    made = AgentNode(
        Node(LocalTransport("server (local)")),
        sys.executable,
        str(tmp_path / "state"),
        trial_log=str(tmp_path / "run" / "server-trials.jsonl"),
    )
    yield made
    made.stop_server(grace_s=5)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> str:
    agent = AgentNode(Node(LocalTransport("site (local)")), sys.executable, "/")
    return agent.build_site(str(tmp_path_factory.mktemp("site")), seed=3, total_bytes=SITE_BYTES)


def test_version_is_the_controllers(agent: AgentNode):
    assert agent.version() == __version__


def test_server_fetch_and_trial_record(agent: AgentNode, site: str):
    server = agent.start_server(
        root=site, host="127.0.0.1", port=0, settings={"max_concurrent_streams": 8}
    )
    assert server.port > 0
    assert agent.server_pid() == server.process.pid
    assert server.settings == (("max_concurrent_streams", 8),)
    with pytest.raises(NodeError, match="names running process"):
        agent.start_server(root=site, host="127.0.0.1", port=0)
    url = f"http://127.0.0.1:{server.port}/"
    record = agent.fetch(url, initial_window_size=4096, trial_id="t-1", timeout_s=60)
    assert record["ok"], record
    assert record["trial_id"] == "t-1"
    assert record["flow_control"]["initial_window_size"] == 4096
    assert record["body_bytes"] == SITE_BYTES
    second = agent.fetch(url, trial_id="t-2", window_update_policy="every-frame")
    assert second["ok"]
    trial = agent.trial_record("t-1")
    assert trial["ok"]
    assert trial["serve_s"] > 0
    assert agent.trial_record("t-2")["trial_id"] == "t-2"
    with pytest.raises(NodeError, match="no record of trial t-1"):
        agent.trial_record("t-1", timeout_s=0.1)  # handed out once
    assert '"event": "listening"' in agent.server_log()
    assert agent.stop_server() == "terminated"
    assert agent.server_pid() is None


def test_a_failed_fetch_still_returns_its_record(agent: AgentNode, site: str, tmp_path: Path):
    other = agent.build_site(str(tmp_path / "other"), seed=4, total_bytes=SITE_BYTES)
    server = agent.start_server(root=site, host="127.0.0.1", port=0)
    record = agent.fetch(
        f"http://127.0.0.1:{server.port}/", manifest=f"{other}/manifest.json", timeout_s=30
    )
    assert record["ok"] is False
    assert record["error"]


def test_a_fetch_without_a_record_raises_the_agents_error(agent: AgentNode):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(CommandFailedError, match=r"exited 1 without a record: .*cannot connect"):
        agent.fetch(f"http://127.0.0.1:{port}/", timeout_s=5)


def test_a_usage_error_raises_one_line(agent: AgentNode):
    with pytest.raises(CommandFailedError) as raised:
        agent.fetch("http://127.0.0.1:1/", settings={"no_such_setting": 1})
    message = str(raised.value)
    assert message.startswith("server (local): fetch http://127.0.0.1:1/ exited 2 without a record")
    assert "\n" not in message


def test_a_server_that_cannot_listen_says_why(agent: AgentNode, site: str):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NodeError, match="server agent exited before listening: ") as raised:
            agent.start_server(root=site, host="127.0.0.1", port=port)
    assert "\n" not in str(raised.value)
    assert agent.server_pid() is None
