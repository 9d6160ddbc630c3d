"""The server-minus-client clock offset the controller gives the client agent's trials: derived
from the two nodes' measured offsets (bounds adding), 0 exactly on one host, passed by the
sweep's agent pair to `AgentNode.run_trial`, per node in a group of clients, and on to a real
`h2iot-agent trial` of the stream workload as `--peer-clock-offset-ns`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.trial_request import TrialRequest
from controller.config import load_config
from controller.nodes.agent import AgentNode, ServerMount
from controller.nodes.clock import PeerOffset
from controller.nodes.node import Node
from controller.nodes.records import ClockOffset
from controller.nodes.transport import LocalTransport
from controller.sweep.agent_pair import AgentPair, peer_clock
from controller.sweep.client_group import ClientGroup, ClientMember
from controller.workloads import Served
from tests.controller.test_agent_pair import POINT, StandInNode

OFFSETS = st.integers(-(10**15), 10**15)
BOUNDS = st.integers(0, 10**9)


@given(
    true_server_ns=OFFSETS,
    true_client_ns=OFFSETS,
    server_bound_ns=BOUNDS,
    client_bound_ns=BOUNDS,
    server_error=st.floats(-1, 1),
    client_error=st.floats(-1, 1),
)
def test_the_difference_holds_the_true_offset_within_its_bound(
    true_server_ns: int,
    true_client_ns: int,
    server_bound_ns: int,
    client_bound_ns: int,
    server_error: float,
    client_error: float,
) -> None:
    # Each measurement is off by at most its bound; their difference by at most the sum.
    server = PeerOffset(true_server_ns + int(server_error * server_bound_ns), server_bound_ns)
    client = PeerOffset(true_client_ns + int(client_error * client_bound_ns), client_bound_ns)
    between = server.minus(client)
    assert between.uncertainty_ns == server_bound_ns + client_bound_ns
    assert abs(between.offset_ns - (true_server_ns - true_client_ns)) <= between.uncertainty_ns


def _clock(wall_offset_ns: int, uncertainty_ns: int) -> dict[str, Any]:
    return asdict(ClockOffset(wall_offset_ns, 0, uncertainty_ns, 100_000, 100))


def _two_hosts(client_host: str = "10.0.0.2", server_host: str = "10.0.0.3") -> Any:
    config = load_config(None)
    return replace(
        config,
        client=replace(config.client, host=client_host),
        server=replace(config.server, host=server_host),
    )


FACTS = {"client": {"clock": _clock(-3_000, 40)}, "server": {"clock": _clock(5_000_000, 60)}}


def test_two_hosts_get_the_server_minus_the_client() -> None:
    assert peer_clock(_two_hosts(), FACTS) == PeerOffset(5_003_000, 100)


def test_one_host_gets_zero_exactly_whatever_was_measured() -> None:
    assert peer_clock(load_config(None), FACTS) == PeerOffset(0, 0)  # local nodes
    assert peer_clock(_two_hosts("pi.lan", "pi.lan"), FACTS) == PeerOffset(0, 0)


def test_an_unmeasured_clock_gets_no_correction() -> None:
    assert peer_clock(_two_hosts(), {**FACTS, "server": {"clock": None}}) is None
    assert PeerOffset.of_node(None) is None


def test_the_pair_passes_the_offset_to_every_trial() -> None:
    client, server = StandInNode(), StandInNode()
    pair = AgentPair(
        _two_hosts(),
        client,  # type: ignore[arg-type]
        server,  # type: ignore[arg-type]
        prepare=lambda _setup: Served(root="/srv/site"),
        marker=None,
        client_offset_ns=-3_000,
        facts=FACTS,
    )
    pair.ensure_server(POINT)
    pair.run_trial("t1", POINT, 30)
    request = client.trial_calls[-1]
    assert (request.peer_clock_offset_ns, request.peer_clock_uncertainty_ns) == (5_003_000, 100)


def test_a_group_gives_each_node_its_own_offset(tmp_path: Path) -> None:
    agent = AgentNode(Node(LocalTransport("client (local)")), sys.executable, str(tmp_path))
    group = ClientGroup(
        [ClientMember("head", agent, -3_000, 40), ClientMember("other", agent, 7_000, 10)],
        kind="stream",
        side_table=tmp_path / "clients.csv",
        lead_s=1.0,
        server_clock=PeerOffset(5_000_000, 60),
    )
    first = TrialRequest("http://x/", peer_clock_offset_ns=5_003_000, peer_clock_uncertainty_ns=100)
    assert group._peer_clock(first, 0, group.members[0]) == first
    other = group._peer_clock(first, 1, group.members[1])
    assert (other.peer_clock_offset_ns, other.peer_clock_uncertainty_ns) == (4_993_000, 70)
    unmeasured = TrialRequest("http://x/")
    assert group._peer_clock(unmeasured, 1, group.members[1]) == unmeasured


# AgentNode.run_trial -> a real h2iot-agent trial --------------------------------------------


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentNode]:
    made = AgentNode(
        Node(LocalTransport("offset (local)")),
        sys.executable,
        str(tmp_path / "state"),
        trial_log=str(tmp_path / "run" / "server-trials.jsonl"),
    )
    yield made
    made.stop_server(grace_s=5)


def test_the_agents_stream_latencies_carry_the_offset(agent: AgentNode) -> None:
    server = agent.start_server(mount=ServerMount("stream"), host="127.0.0.1", port=0)
    offset = PeerOffset(-(10**12), 1_234)  # the server 1000 s behind: latencies near -1000 s
    record = agent.run_trial(
        TrialRequest(
            f"http://127.0.0.1:{server.port}/",
            workload="stream",
            params=(("rate_hz", 20.0), ("duration_s", 0.3), ("payload_doubles", 4)),
            trial_id="offset-1",
            timeout_s=30,
            peer_clock_offset_ns=offset.offset_ns,
            peer_clock_uncertainty_ns=offset.uncertainty_ns,
        )
    )
    assert record["ok"], record
    assert record["latency_clock_correction"] == "peer_clock_offset"
    assert (record["peer_clock_offset_ns"], record["peer_clock_uncertainty_ns"]) == (
        -(10**12),
        1_234,
    )
    true_p50_s = record["metrics"]["latency_p50_s"] + 1_000
    assert 0 < true_p50_s < 1.0
