"""`nodes check`: what each node is and how its clocks relate to the controller's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agent.nghttp2.tools import SYSTEM_DIRS, missing_message
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
    # `nghttp --version` or `nghttpd --version` on a node whose engine is nghttp2.
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
            node, config, expected_version=expected_version, clock_samples=clock_samples
        )
    finally:
        node.close()


def inspect_node(
    node: Node, config: NodeConfig, *, expected_version: str, clock_samples: int = 200
) -> NodeFacts:
    """What `check_node` finds out, on a node that is already connected (left open)."""
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
    engine = _attempt(problems, lambda: _engine_version(node, config))
    return NodeFacts(node.label, True, interpreter, version, cpu, clock, tuple(problems), engine)


def _engine_version(node: Node, config: NodeConfig) -> str | None:
    """The nghttp2 tool the node's engine drives, or a NodeError naming the package to install."""
    if config.engine != "nghttp2":
        return None
    tool = "nghttp" if config.role == "client" else "nghttpd"
    # Where the agent's lookup (agent.nghttp2.tools) finds it too: nghttpd is in /usr/sbin.
    path = ":".join(["$PATH", *SYSTEM_DIRS])
    found = node.shell(
        f'PATH="{path}"; command -v {tool} >/dev/null && {tool} --version', check=False
    )
    if not found.ok:
        raise NodeError(
            f'{node.label}: {missing_message(tool)} (nodes.{config.role}.engine = "nghttp2")'
        )
    return found.stdout.strip()


def _attempt(problems: list[str], step: Callable[[], T]) -> T | None:
    try:
        return step()
    except NodeError as exc:
        problems.append(str(exc))
        return None
