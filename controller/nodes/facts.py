"""`nodes check`: what each node is and how its clocks relate to the controller's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from agent.engines import engine_spec
from agent.engines.spec import SYSTEM_DIRS
from agent.protocols import protocol_spec
from controller.config.model import NodeConfig
from controller.nodes.agent import agent_version, python_version
from controller.nodes.connect import connect, node_label
from controller.nodes.errors import NodeError
from controller.nodes.node import Node
from controller.nodes.platform import cpu_model
from controller.nodes.records import ClockOffset
from controller.nodes.ssh import NewHostKeyNotice

T = TypeVar("T")


@dataclass(frozen=True)
class NodeFacts:
    """One node's check; a None field could not be found out, `problems` say why (one line
    each, naming the node)."""

    label: str
    reachable: bool
    python_version: str | None
    agent_version: str | None
    cpu_model: str | None
    clock: ClockOffset | None
    problems: tuple[str, ...]
    # The distribution tools its engine runs (`nghttp --version`, or gtlsclient's path: ngtcp2's
    # tools print no version), "; " between them; None for an engine the agent carries.
    engine_version: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_node(
    config: NodeConfig,
    *,
    expected_version: str,
    accept_new_host_key: bool = False,
    on_new_host_key: NewHostKeyNotice = print,
    clock_samples: int = 200,
    protocols: Sequence[str],
) -> NodeFacts:
    """Connect and find out everything `NodeFacts` holds; failures become problems."""
    label = node_label(config)
    try:
        node = connect(
            config, accept_new_host_key=accept_new_host_key, on_new_host_key=on_new_host_key
        )
    except NodeError as exc:
        return NodeFacts(label, False, None, None, None, None, (str(exc),))
    try:
        return inspect_node(
            node,
            config,
            expected_version=expected_version,
            clock_samples=clock_samples,
            protocols=protocols,
        )
    finally:
        node.close()


def inspect_node(
    node: Node,
    config: NodeConfig,
    *,
    expected_version: str,
    clock_samples: int = 200,
    protocols: Sequence[str],
) -> NodeFacts:
    """What `check_node` finds out, on a node that is already connected (left open), for a run
    over `protocols` (the engine's tools differ between HTTP/2 and HTTP/3)."""
    problems: list[str] = []
    python = node.path(config.python)
    interpreter = _attempt(problems, lambda: python_version(node, python))
    version = _attempt(problems, lambda: agent_version(node, [python, "-m", "agent.cli"]))
    if version is not None and version != expected_version:
        problems.append(
            f"{node.label}: agent {version} differs from the controller's {expected_version}; "
            "run `h2iot nodes deploy`"
        )
    cpu = _attempt(problems, lambda: cpu_model(node.read_file("/proc/cpuinfo")))
    clock = _attempt(problems, lambda: node.clock_offset(python, samples=clock_samples))
    engine = _attempt(problems, lambda: engine_tools(node, config, protocols))
    return NodeFacts(node.label, True, interpreter, version, cpu, clock, tuple(problems), engine)


def engine_tools(node: Node, config: NodeConfig, protocols: Sequence[str]) -> str | None:
    """The distribution tools the node's engine runs over `protocols`, each's version (or path),
    or a NodeError naming the first missing one's package to install."""
    spec = engine_spec(config.engine)
    quic = (protocol_spec(protocol).quic for protocol in protocols)
    tools = spec.system_tools(config.role == "client", quic)
    if not tools:
        return None
    # Where the agent's lookup finds them too (agent.engines.spec.SYSTEM_DIRS).
    path = ":".join(["$PATH", *SYSTEM_DIRS])
    found = []
    for tool in tools:
        # ngtcp2's tools have no --version: their path says they are there.
        probe = f'PATH="{path}"; command -v {tool} >/dev/null && ({tool} --version 2>/dev/null'
        probe += f" || command -v {tool})"
        result = node.shell(probe, check=False)
        if not result.ok:
            raise NodeError(
                f"{node.label}: {spec.missing_message(tool)} "
                f'(nodes.{config.role}.engine = "{config.engine}")'
            )
        found.append(result.stdout.strip().splitlines()[0])
    return "; ".join(found)


def _attempt(problems: list[str], step: Callable[[], T]) -> T | None:
    try:
        return step()
    except NodeError as exc:
        problems.append(str(exc))
        return None
