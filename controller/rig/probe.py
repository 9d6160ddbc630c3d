"""`h2iot rig check`'s I/O: reach each node and ask its agent, then run the meter's lines as its
source's declaration says (controller/meter_sources/<name>/rig.py), handing each finding to
`controller.rig.checks` for judgment.

The nodes are checked first, while nothing of ours loads them; the meter then runs with the
nodes idle (their anchors, for a modelled meter), then the client node pulses its marker.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from agent import __version__
from controller.config.model import (
    ROLES,
    Config,
    NodeConfig,
)
from controller.errors import ConfigError
from controller.nodes.errors import NodeError
from controller.nodes.facts import inspect_node
from controller.nodes.node import Node
from controller.nodes.udp_reach import UdpReach, probe_udp, udp_pairs
from controller.rig import checks, meter_facts
from controller.rig.bench import (
    NODE_TIMEOUT_S,
    Emit,
    Nodes,
    marker_line,
)
from controller.rig.checks import Check
from controller.sweep.setup import open_node


def check_rig(
    config: Config,
    emit: Emit,
    *,
    marker: str | None = None,
    accept_new_host_key: bool = False,
    seconds: float = 2.0,
    sample_s: float = 1.0,
) -> None:
    """Every check of the rig the config describes, each handed to `emit` as it is judged: the
    nodes first, while nothing of ours loads them, then the meter: what it can see (its
    declaration's `facts`), then its source's own lines (the `rig_check` of its declaration)."""
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rig-check-")))
        opened: Nodes = {}
        for role in ROLES:
            found = _check_node(
                config.node(role), config.protocols, emit, accept_new_host_key, sample_s
            )
            if found is not None:
                stack.callback(found[0].close)
                opened[role] = found
        if udp_pairs(config):
            emit(checks.udp_check(_udp_reach(config, opened)))
        line = marker_line(config, marker, scratch)
        for check in meter_facts.config_checks(config):
            emit(check)
        spec = config.meter.spec
        if spec.rig_check is None:
            emit(Check("meter", "unavailable", f"the {spec.name} meter has no rig check"))
            return
        spec.load(spec.rig_check)(config, opened, emit, marker=line, seconds=seconds)


# --- nodes ---------------------------------------------------------------------------------


def _check_node(
    config: NodeConfig,
    protocols: Sequence[str],
    emit: Emit,
    accept_new_host_key: bool,
    sample_s: float,
) -> tuple[Node, int | None] | None:
    role = config.role
    try:
        node, anchor = open_node(config, accept_new_host_key=accept_new_host_key)
    except (NodeError, ConfigError) as exc:
        emit(checks.ssh_check(role, local=config.is_local, error=str(exc), host=config.host))
        return None
    emit(checks.ssh_check(role, local=config.is_local, error=None, host=config.host))
    facts = inspect_node(
        node, config, expected_version=__version__, clock_samples=50, protocols=protocols
    )
    emit(
        checks.versions_check(
            role,
            python=facts.python_version,
            agent=facts.agent_version,
            expected_agent=__version__,
            problems="; ".join(facts.problems),
        )
    )
    clock = facts.clock
    emit(
        checks.clock_check(
            role,
            offset_ns=None if clock is None else clock.wall_offset_ns,
            uncertainty_ns=None if clock is None else clock.uncertainty_ns,
            samples=0 if clock is None else clock.samples,
        )
    )
    report = _conditions(node, config, sample_s)
    if isinstance(report, str):
        emit(Check(f"{role} conditions", "fail", report, "h2iot nodes deploy CONFIG"))
        return node, anchor
    emit(checks.governor_check(role, report))
    emit(checks.thermal_check(role, report))
    emit(checks.throttle_check(role, report))
    emit(checks.memory_check(role, report))
    # A local node shares this machine: the controller itself is not another process there.
    emit(checks.busy_check(role, report, ignore=(os.getpid(),) if config.is_local else ()))
    return node, anchor


def _udp_reach(config: Config, nodes: Nodes) -> UdpReach:
    """The metered client's datagrams to the server's HTTP/3 port (HTTP/3 runs one client)."""
    client, server = config.client, config.server
    if "client" not in nodes or "server" not in nodes:
        missing = " and ".join(role for role in ROLES if role not in nodes)
        return UdpReach.of_pair(client, server, "not probed", f"the {missing} node was not reached")
    return probe_udp(nodes["client"][0], client, nodes["server"][0], server)


def _conditions(node: Node, config: NodeConfig, sample_s: float) -> dict[str, Any] | str:
    """The agent's `conditions` report, or why there is none."""
    argv = [node.path(config.python), "-m", "agent.cli", "conditions", "--sample-s", f"{sample_s}"]
    if config.cpu is not None:
        argv += ["--cpu", str(config.cpu)]
    try:
        result = node.run(argv, timeout_s=NODE_TIMEOUT_S + sample_s)
    except NodeError as exc:
        return str(exc)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"{node.label}: `h2iot-agent conditions` printed no JSON"
    return report if isinstance(report, dict) else f"{node.label}: conditions: not an object"
