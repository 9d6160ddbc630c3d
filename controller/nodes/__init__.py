"""Nodes: the machines the agents run on, reached through one interface over two transports.

- `Node` runs commands (with a timeout enforced on the node), background processes by pidfile,
  file reads (whole, or new lines since an offset), file copies and clock-offset measurements,
  over a `LocalTransport` (subprocesses) or an `SshTransport` (fabric, host keys checked).
- `connect(NodeConfig)` opens the right one; `fan_out` runs work per node and keeps every
  node's outcome (`GroupOutcome`), failures included.
- `AgentNode` drives the node agent's CLI: server start/stop/health/log, client fetches, the
  server's per-trial records.
- `check_node` and `install` (with `controller.nodes.wheel`) back `h2iot nodes check|deploy`.
"""

from __future__ import annotations

from controller.nodes.agent import AgentNode, ServerMount, ServerProcess
from controller.nodes.connect import connect, node_label
from controller.nodes.errors import (
    CommandFailedError,
    CommandTimeoutError,
    DeployError,
    HostKeyError,
    NodeError,
    NodeGroupError,
    NodeUnreachableError,
)
from controller.nodes.facts import NodeFacts, check_node
from controller.nodes.group import GroupOutcome, fan_out
from controller.nodes.node import Node
from controller.nodes.records import (
    BackgroundProcess,
    ClockOffset,
    CommandResult,
    NewLines,
    StopOutcome,
)
from controller.nodes.ssh import SshTarget, SshTransport, open_ssh
from controller.nodes.transport import LocalTransport, Transport

__all__ = [
    "AgentNode",
    "BackgroundProcess",
    "ClockOffset",
    "CommandFailedError",
    "CommandResult",
    "CommandTimeoutError",
    "DeployError",
    "GroupOutcome",
    "HostKeyError",
    "LocalTransport",
    "NewLines",
    "Node",
    "NodeError",
    "NodeFacts",
    "NodeGroupError",
    "NodeUnreachableError",
    "ServerMount",
    "ServerProcess",
    "SshTarget",
    "SshTransport",
    "StopOutcome",
    "Transport",
    "check_node",
    "connect",
    "fan_out",
    "node_label",
    "open_ssh",
]
