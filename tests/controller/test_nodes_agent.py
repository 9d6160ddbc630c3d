"""`AgentNode` on a local node: the real agent CLI as server and client processes."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import __version__
from agent.trial_request import TrialRequest
from controller.nodes.agent import AgentNode, ServerMount
from controller.nodes.errors import CommandFailedError, NodeError
from controller.nodes.node import Node
from controller.nodes.transport import LocalTransport
from controller.workloads.page import PageSites

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


def _page(site: str, **settings: int) -> ServerMount:
    return ServerMount("page", tuple(settings.items()), (), site)


def test_server_fetch_and_trial_record(agent: AgentNode, site: str):
    mount = _page(site, max_concurrent_streams=8)
    server = agent.start_server(mount=mount, host="127.0.0.1", port=0)
    assert server.port > 0
    assert agent.server_pid() == server.process.pid
    assert server.mount == mount
    with pytest.raises(NodeError, match="names running process"):
        agent.start_server(mount=_page(site), host="127.0.0.1", port=0)
    url = f"http://127.0.0.1:{server.port}/"
    record = agent.run_trial(
        TrialRequest(url, settings=(("initial_window_size", 4096),), trial_id="t-1", timeout_s=60)
    )
    assert record["ok"], record
    assert record["trial_id"] == "t-1"
    assert record["flow_control"]["initial_window_size"] == 4096
    assert record["settings"]["initial_window_size"] == 4096
    assert record["body_bytes"] == SITE_BYTES
    assert record["metrics"] == {"resource_count": 8, "body_bytes": SITE_BYTES}
    second = agent.run_trial(TrialRequest(url, trial_id="t-2", window_update_policy="every-frame"))
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
    server = agent.start_server(mount=_page(site), host="127.0.0.1", port=0)
    record = agent.run_trial(
        TrialRequest(
            f"http://127.0.0.1:{server.port}/", manifest=f"{other}/manifest.json", timeout_s=30
        )
    )
    assert record["ok"] is False
    assert record["error"]


def test_a_trial_that_cannot_connect_is_still_a_record(agent: AgentNode):
    """Every failure of a trial is its record (issue 13), a refused connection too."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    record = agent.run_trial(TrialRequest(f"http://127.0.0.1:{port}/", timeout_s=5))
    assert record["ok"] is False
    assert str(port) in record["error"] or "connect" in record["error"], record["error"]


def test_a_usage_error_raises_one_line(agent: AgentNode):
    with pytest.raises(CommandFailedError) as raised:
        agent.run_trial(TrialRequest("http://127.0.0.1:1/", settings=(("no_such_setting", 1),)))
    message = str(raised.value)
    assert message.startswith("server (local): trial http://127.0.0.1:1/ exited 2 without a record")
    assert "\n" not in message


def test_a_server_that_cannot_listen_says_why(agent: AgentNode, site: str):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NodeError, match="server agent exited before listening: ") as raised:
            agent.start_server(mount=_page(site), host="127.0.0.1", port=port)
    assert "\n" not in str(raised.value)
    assert agent.server_pid() is None


def test_a_blob_server_and_client_trial(agent: AgentNode):
    """The test workload through the same calls: its parameters reach the agents as --param."""
    server = agent.start_server(mount=ServerMount("blob"), host="127.0.0.1", port=0)
    record = agent.run_trial(
        TrialRequest(
            f"http://127.0.0.1:{server.port}/",
            workload="blob",
            params=(("size_bytes", 5000), ("requests", 2), ("mode", "concurrent")),
            trial_id="b-1",
            timeout_s=30,
        )
    )
    assert record["ok"], record
    assert record["workload"] == "blob"
    assert record["params"] == {
        "size_bytes": 5000,
        "requests": 2,
        "mode": "concurrent",
        "verify": "sha256",
    }
    assert record["metrics"]["request_count"] == 2
    assert record["metrics"]["body_bytes"] == 10_000
    trial = agent.trial_record("b-1")
    assert trial["workload"] == "blob"
    assert trial["requests"] == 2


def test_the_page_workloads_sites_are_built_once_per_seed_and_size(tmp_path: Path):
    """Either page parameter can be swept: one site per distinct pair, reused after."""
    node = AgentNode(Node(LocalTransport("server (local)")), sys.executable, str(tmp_path))
    sites = PageSites(node, str(tmp_path), client_shares_host=True)
    first = sites({"site_seed": 1, "total_bytes": SITE_BYTES})
    other = sites({"site_seed": 1, "total_bytes": 2 * SITE_BYTES})
    assert sites({"site_seed": 1, "total_bytes": SITE_BYTES}) == first
    assert first.root != other.root
    assert first.manifest == f"{first.root}/manifest.json"
    sizes = [
        sum(
            f.stat().st_size
            for f in Path(served.root or "").rglob("*")
            if f.is_file() and f.name != "manifest.json"
        )
        for served in (first, other)
    ]
    assert sizes == [SITE_BYTES, 2 * SITE_BYTES]
    assert (
        PageSites(node, str(tmp_path), client_shares_host=False)(
            {"site_seed": 1, "total_bytes": SITE_BYTES}
        ).manifest
        is None
    )


def test_a_line_that_is_not_a_record_is_named_once_and_the_records_after_it_still_count(
    tmp_path: Path,
):
    node = AgentNode(Node(LocalTransport("server (local)")), sys.executable, str(tmp_path))
    log = Path(node.trial_log)
    log.write_text('{"trial_id":"t01","ok":true}\n{"trial_id":"t02","ok":tr\n')
    with pytest.raises(NodeError, match=r'not a trial record: \{"trial_id":"t02","ok":tr$'):
        node.trial_record("t01", timeout_s=0)
    with log.open("a") as handle:
        handle.write('{"trial_id":"t03","ok":true}\n')
    assert node.trial_record("t03", timeout_s=5)["ok"] is True
    assert node.trial_record("t01", timeout_s=0)["trial_id"] == "t01"
