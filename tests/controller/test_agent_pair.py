"""How the sweep's agent pair turns what the nodes do into trials: a node that cannot be
reached is a lost node (the sweep pauses), a command that failed is a failed trial (retried),
and over memory-limited devices a trial killed for lack of memory says so.

The nodes here are stand-ins for `AgentNode` that fail on cue; the real agent commands behind
these calls are exercised in tests/controller/test_nodes_agent.py and the end-to-end sweeps."""

from __future__ import annotations

from typing import Any

import pytest

from agent.trial_request import TrialRequest
from controller.config import load_config
from controller.config.profile import DeviceProfile
from controller.nodes.agent import ServerMount, ServerProcess
from controller.nodes.errors import CommandFailedError, NodeError, NodeUnreachableError
from controller.nodes.records import BackgroundProcess
from controller.sweep.agent_pair import AgentPair
from controller.sweep.errors import NodeLost
from controller.sweep.memory_pair import MemoryWatchedPair
from controller.workloads import Served

POINT = load_config(None).point((("initial_window_size", 4096),))


class StandInNode:
    """The parts of `AgentNode` the pair calls, each failing when told to."""

    def __init__(self) -> None:
        self.running = False
        self.start_error: Exception | None = None
        self.trial_error: Exception | None = None
        self.record: dict[str, Any] = {"ok": True}
        self.oom_on_start = False
        self.oom_on_trial = False
        self.kills = 0
        self.trial_calls: list[TrialRequest] = []

    def stop_server(self, grace_s: float = 0) -> str:
        self.running = False
        return "terminated"

    def server_pid(self) -> int | None:
        return 4242 if self.running else None

    def start_server(self, *, mount: ServerMount, **_options: Any) -> ServerProcess:
        if self.oom_on_start:
            self.kills += 1
        if self.start_error is not None:
            raise self.start_error
        self.running = True
        return ServerProcess(BackgroundProcess(4242, "server.pid", "server.log"), 8443, mount)

    def run_trial(self, request: TrialRequest) -> dict[str, Any]:
        self.trial_calls.append(request)
        if self.oom_on_trial:
            self.kills += 1
        if self.trial_error is not None:
            raise self.trial_error
        return dict(self.record)


class Cgroup:
    """A node's OOM-kill counter, read through the stand-in node it limits."""

    def __init__(self, node: StandInNode, memory_mib: int) -> None:
        self.node = node
        self.profile = DeviceProfile(memory_mib=memory_mib)

    def oom_kills(self) -> int:
        return self.node.kills


def _pair(limits: dict[str, int] | None = None) -> tuple[AgentPair, StandInNode, StandInNode]:
    """A pair over stand-in nodes; with `limits` (role -> MiB), the memory-watched one."""
    client, server = StandInNode(), StandInNode()
    options: dict[str, Any] = {
        "prepare": lambda _setup: Served(root="/srv/site"),
        "marker": None,
        "client_offset_ns": 0,
        "facts": {},
    }
    nodes = (load_config(None), client, server)
    if limits is None:
        return AgentPair(*nodes, **options), client, server
    by_role = {"client": client, "server": server}
    cgroups = {role: Cgroup(by_role[role], mib) for role, mib in limits.items()}
    return MemoryWatchedPair(cgroups, *nodes, **options), client, server


def test_an_unreachable_client_is_a_lost_node_naming_its_role() -> None:
    pair, client, _server = _pair()
    pair.ensure_server(POINT)
    client.trial_error = NodeUnreachableError("client (ssh pi@10.0.0.2): connection reset")
    with pytest.raises(NodeLost) as lost:
        pair.run_trial("t1", POINT, 30)
    assert lost.value.role == "client"
    assert "connection reset" in str(lost.value)


def test_a_failed_command_is_a_failed_trial_that_says_whether_the_server_died() -> None:
    pair, client, server = _pair()
    pair.ensure_server(POINT)
    client.trial_error = CommandFailedError("client (local): trial exited 1 without a record")
    assert pair.run_trial("t1", POINT, 30) == {
        "ok": False,
        "error": "client (local): trial exited 1 without a record",
    }
    server.running = False  # the server agent died under the trial
    result = pair.run_trial("t2", POINT, 30)
    assert result["ok"] is False
    assert result["error"].endswith(" (the server agent is not running)")


def test_a_server_that_cannot_start_is_a_lost_node() -> None:
    pair, _client, server = _pair()
    server.start_error = NodeUnreachableError("server (ssh): no route to host")
    with pytest.raises(NodeLost) as unreachable:
        pair.ensure_server(POINT)
    assert unreachable.value.role == "server" and str(unreachable.value) == (
        "server (ssh): no route to host"
    )
    server.start_error = NodeError("server (local): server agent exited before listening: x")
    with pytest.raises(NodeLost, match=r"^server agent: server \(local\): server agent exited"):
        pair.ensure_server(POINT)


def test_the_trial_gets_the_points_settings_and_the_server_restarts_only_on_change() -> None:
    pair, client, server = _pair()
    pair.ensure_server(POINT)
    first = server.server_pid()
    pair.ensure_server(POINT)
    assert server.server_pid() == first
    pair.run_trial("t1", POINT, 30)
    (request,) = client.trial_calls
    assert request.settings == (("initial_window_size", 4096),)
    assert request.connection_window == 4096  # unset in the config: the stream window
    assert request.workload == "page" and request.params == (("verify", "sha256"),)
    assert request.event_loop == "asyncio"
    assert request.protocol == "h2c"  # named, not left to the URL's scheme


def test_a_server_killed_for_lack_of_memory_fails_the_next_trial_naming_the_limit() -> None:
    pair, client, server = _pair({"server": 12})
    server.oom_on_start = True
    server.start_error = NodeError("server (local): server agent exited before listening: Killed")
    pair.ensure_server(POINT)  # not a lost node: the limit explains it
    result = pair.run_trial("t1", POINT, 30)
    assert result["ok"] is False
    assert result["error"].startswith(
        "out of memory: the kernel killed 1 process of the server node, which exceeded its "
        "device's memory limit (12 MiB, profile custom) (server agent: server agent: "
    )
    assert client.trial_calls == []  # the trial never ran
    server.oom_on_start = False  # a failure the counter does not explain stays a lost node
    with pytest.raises(NodeLost):
        pair.ensure_server(POINT)


def test_a_client_killed_for_lack_of_memory_says_so_before_the_agents_error() -> None:
    pair, client, _server = _pair({"client": 16})
    pair.ensure_server(POINT)
    client.record = {"ok": False, "error": "connection closed"}
    assert pair.run_trial("t1", POINT, 30)["error"] == "connection closed"  # no kill: as is
    client.oom_on_trial = True
    assert pair.run_trial("t2", POINT, 30)["error"] == (
        "out of memory: the kernel killed 1 process of the client node, which exceeded its "
        "device's memory limit (16 MiB, profile custom): connection closed"
    )
    client.record = {"ok": True}  # a kill the trial survived is not the trial's failure
    assert pair.run_trial("t3", POINT, 30) == {"ok": True}
