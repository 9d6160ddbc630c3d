"""A warm client agent (`AgentNode.keep_warm`, controller.nodes.warm) on a local node under its
anchor and on an SSH node (a real sshd on 127.0.0.1, reached through a direct-tcpip channel):
the real agent, serving page trials one after another in one process, against fresh trial
processes of the same point; a hung or killed agent replaced; nothing left running."""

from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agent.trial_request import TrialRequest
from controller.device.netns import create_link, destroy_link, run_inside
from controller.nodes.agent import TRIAL_PROCESS, AgentNode, ServerMount
from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.errors import CommandFailedError, CommandTimeoutError
from controller.nodes.node import Node
from tests.controller.test_nodes_transport import ssh_node
from tests.netns import SshHost
from tests.netns.require import require_root

# The sshd fixtures (tests.netns: ssh_key, loopback_host).
pytest_plugins = ["tests.netns.fixtures"]

SITE_BYTES = 150_000
TRIALS = 5


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> str:
    node = Node(AnchoredLocalTransport("site (local)"))
    try:
        builder = AgentNode(node, sys.executable, "/")
        return builder.build_site(
            str(tmp_path_factory.mktemp("site")), seed=5, total_bytes=SITE_BYTES
        )
    finally:
        node.close()


def _client_node(request: pytest.FixtureRequest) -> Node:
    if getattr(request, "param", "local") == "ssh":
        host: SshHost = request.getfixturevalue("loopback_host")
        return ssh_node(host)
    return Node(AnchoredLocalTransport("client (local)"))


@pytest.fixture
def nodes(
    request: pytest.FixtureRequest, tmp_path: Path, site: str
) -> Iterator[tuple[AgentNode, AgentNode, str]]:
    """(server, client, url): the server an anchored local node; the client one too, or an SSH
    node when parametrized with "ssh"."""
    server = AgentNode(
        Node(AnchoredLocalTransport("server (local)")),
        sys.executable,
        str(tmp_path / "server-state"),
        trial_log=str(tmp_path / "server-trials.jsonl"),
    )
    client = AgentNode(_client_node(request), sys.executable, str(tmp_path / "state"))
    running = server.start_server(mount=ServerMount("page", (), (), site), host="127.0.0.1", port=0)
    yield server, client, f"http://127.0.0.1:{running.port}/"
    client.end_warm()
    server.stop_server(grace_s=5)
    client.node.close()
    server.node.close()


def _warm_pid(client: AgentNode) -> int | None:
    assert client.warm is not None
    return client.node.running_pid(client.warm.pidfile)


@pytest.mark.parametrize("nodes", ["local", "ssh"], indirect=True)
def test_warm_trials_run_in_one_process_and_cost_less_cpu_than_fresh_ones(
    nodes: tuple[AgentNode, AgentNode, str],
) -> None:
    _server, client, url = nodes
    fresh = [
        client.run_trial(TrialRequest(url, trial_id=f"fresh-{i}", timeout_s=60))
        for i in range(TRIALS)
    ]
    warm_agent = client.keep_warm()
    warm = []
    pids = set()
    for i in range(TRIALS):
        warm.append(client.run_trial(TrialRequest(url, trial_id=f"warm-{i}", timeout_s=60)))
        pids.add(_warm_pid(client))
    assert warm_agent.started == 1 and len(pids) == 1 and None not in pids
    for record in fresh + warm:
        assert record["ok"], record
        assert record["body_bytes"] == SITE_BYTES
        assert record["metrics"] == {"resource_count": 8, "body_bytes": SITE_BYTES}
    # The same record, field for field, whichever process ran it; and the warm agent's account
    # of a trial holds the fetch, as a fresh process's span does (an SSH node times no
    # command's process, but a warm agent times its trials everywhere).
    assert set(warm[0]) - {TRIAL_PROCESS} == set(fresh[0]) - {TRIAL_PROCESS}
    for record in warm:
        span = record[TRIAL_PROCESS]
        assert span["t_mono_start_ns"] <= record["t_mono_start_ns"]
        assert record["t_mono_end_ns"] <= span["t_mono_end_ns"]
    if TRIAL_PROCESS in fresh[0]:
        # A fresh process pays the interpreter's start-up and imports on top of the fetch.
        fresh_cpu = statistics.median(r[TRIAL_PROCESS]["cpu_s"] for r in fresh)
        warm_cpu = statistics.median(r[TRIAL_PROCESS]["cpu_s"] for r in warm)
        print(f"trial CPU, median of {TRIALS}: fresh {fresh_cpu:.4f} s, warm {warm_cpu:.4f} s")
        assert warm_cpu < fresh_cpu
    pid = _warm_pid(client)
    assert pid is not None
    # Hanging up ends the agent: nothing of the sweep stays on the node.
    client.end_warm()
    assert _gone(pid)


@pytest.mark.parametrize("nodes", ["ssh"], indirect=True)
def test_a_closed_ssh_session_ends_its_warm_agent(nodes: tuple[AgentNode, AgentNode, str]) -> None:
    _server, client, url = nodes
    client.keep_warm()
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    pid = _warm_pid(client)
    assert pid is not None
    client.node.close()  # as a controller that dies does: no goodbye to the agent
    assert _gone(pid)
    client.warm = None  # the fixture's end_warm would talk to a closed session


def test_a_usage_error_is_one_line_and_the_agent_serves_on(
    nodes: tuple[AgentNode, AgentNode, str],
) -> None:
    _server, client, url = nodes
    warm_agent = client.keep_warm()
    with pytest.raises(CommandFailedError) as caught:
        client.run_trial(TrialRequest(url, params=(("nope", 1),), timeout_s=60))
    message = str(caught.value)
    assert "\n" not in message and "nope" in message, message
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    assert warm_agent.started == 1


def test_a_killed_agent_fails_its_trial_and_the_next_trial_gets_a_new_one(
    nodes: tuple[AgentNode, AgentNode, str],
) -> None:
    _server, client, url = nodes
    warm_agent = client.keep_warm()
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    first = _warm_pid(client)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    with pytest.raises(CommandFailedError, match=r"^client \(local\): warm agent ended during"):
        client.run_trial(TrialRequest(url, timeout_s=60))
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    assert warm_agent.started == 2 and _warm_pid(client) not in (None, first)


def test_a_hung_agent_is_killed_at_the_timeout_and_replaced(
    nodes: tuple[AgentNode, AgentNode, str],
) -> None:
    _server, client, url = nodes
    warm_agent = client.keep_warm()
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    hung = _warm_pid(client)
    assert hung is not None
    os.kill(hung, signal.SIGSTOP)
    with pytest.raises(CommandTimeoutError, match="still running after 1 s"):
        warm_agent.run(TrialRequest(url), timeout_s=1)
    assert _gone(hung)
    assert client.run_trial(TrialRequest(url, timeout_s=60))["ok"]
    assert warm_agent.started == 2


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.root
def test_a_warm_agent_in_a_namespace_of_its_own_is_reached_on_that_namespaces_loopback(
    tmp_path: Path, site: str
) -> None:
    """An emulated device's node: its anchor, so its agents, live in a network namespace with
    its own loopback, which the controller reaches from a thread that entered it."""
    require_root()
    link = create_link(f"h2w{os.getpid() % 10000}")
    try:
        server = AgentNode(
            Node(run_inside(link.namespace("server"), lambda: AnchoredLocalTransport("server"))),
            sys.executable,
            str(tmp_path / "server-state"),
            trial_log=str(tmp_path / "server-trials.jsonl"),
        )
        client = AgentNode(
            Node(run_inside(link.namespace("client"), lambda: AnchoredLocalTransport("client"))),
            sys.executable,
            str(tmp_path / "state"),
        )
        try:
            running = server.start_server(
                mount=ServerMount("page", (), (), site), host=link.address("server"), port=0
            )
            url = f"http://{link.address('server')}:{running.port}/"
            client.keep_warm()
            records = [client.run_trial(TrialRequest(url, timeout_s=60)) for _ in range(2)]
            assert all(r["ok"] for r in records), records
            assert client.warm is not None and client.warm.started == 1
        finally:
            client.end_warm()
            server.stop_server(grace_s=5)
            client.node.close()
            server.node.close()
    finally:
        destroy_link(link)
