"""Open a `Node` from its configuration: local subprocesses or SSH."""

from __future__ import annotations

from controller.config.model import NodeConfig
from controller.errors import ConfigError
from controller.nodes.node import Node
from controller.nodes.ssh import NewHostKeyNotice, SshTarget, open_ssh
from controller.nodes.transport import LocalTransport


def node_label(config: NodeConfig) -> str:
    """`client (local)` or `server (pi@10.0.0.2:22)`: how every message names the node (an
    entry of nodes.clients by its name, `client2 (pi@10.0.0.12:22)`)."""
    name = config.name or config.role
    if config.is_local:
        return f"{name} (local)"
    user = f"{config.user}@" if config.user else ""
    return f"{name} ({user}{config.host}:{config.port})"


def connect(
    config: NodeConfig,
    *,
    accept_new_host_key: bool = False,
    on_new_host_key: NewHostKeyNotice = print,
) -> Node:
    """A connected node. SSH nodes check their host key against `known_hosts` (see open_ssh)."""
    label = node_label(config)
    if config.is_local:
        return Node(LocalTransport(label))
    if config.known_hosts is None:
        raise ConfigError(f"nodes.{config.role}.known_hosts: required for an SSH node")
    target = SshTarget(
        host=config.host,
        port=config.port,
        user=config.user,
        key=config.key,
        known_hosts=config.known_hosts,
    )
    transport = open_ssh(
        label, target, accept_new_host_key=accept_new_host_key, on_new_host_key=on_new_host_key
    )
    return Node(transport)
