"""Shape the data link on both nodes for as long as a sweep runs, then put it back.

The I/O shell around `controller.link.commands`: it checks the setup (root or passwordless
sudo, the interface exists, the client really reaches the server through it), plans both ends
before touching either, applies, and on exit (or a failure halfway) runs the removal commands
and checks from the interface's state that nothing of h2iot's is left.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from controller.config.model import ROLES, Config, LinkConfig, Role
from controller.errors import ConfigError, ControllerError
from controller.link.commands import Argv, EndPlan, plan_end, removal_problems, tcp_goodput_mbit
from controller.link.errors import LinkError
from controller.link.state import InterfaceState, parse_interface, parse_route_device, qdisc_facts
from controller.nodes.node import Node
from controller.nodes.records import CommandResult

STEP_TIMEOUT_S = 30.0
SUDO: Argv = ("sudo", "-n")
# The kernel feature a command needs (a word in it), the link key that asked for it, and what.
_FEATURES = (
    ("netem", "link.delay_ms", "delay"),
    ("tbf", "link.rate_mbit", "a rate"),
    ("bpf", "link.loss_pct", "loss"),
)
_UNSUPPORTED = ("kind is unknown", "classifier not found", "Failed to load")


@dataclass(frozen=True)
class _End:
    role: Role
    node: Node
    sudo: Argv  # () as root, else SUDO
    before: InterfaceState
    plan: EndPlan

    def run(self, argv: Argv) -> CommandResult:
        return self.node.run([*self.sudo, *argv], timeout_s=STEP_TIMEOUT_S, check=False)

    def output(self, argv: Argv) -> str:
        result = self.run(argv)
        if not result.ok:
            raise LinkError(f"{self.node.label}: `{shlex.join(argv)}` failed: {_detail(result)}")
        return result.stdout


def _detail(result: CommandResult) -> str:
    """The last line a failed command printed: tc and ip put their reason there."""
    lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return lines[-1] if lines else f"exit status {result.exit_status}"


def _inspect(node: Node, sudo: Argv, interface: str) -> tuple[InterfaceState, str]:
    """The interface's state, and its `tc -j -d qdisc show` output for the facts."""

    def out(*argv: str, check: bool = True) -> str:
        result = node.run([*sudo, *argv], timeout_s=STEP_TIMEOUT_S, check=check)
        return result.stdout if result.ok else ""

    addr = out("ip", "-j", "-d", "addr", "show", "dev", interface)
    qdiscs = out("tc", "-j", "-d", "qdisc", "show", "dev", interface)
    filters = out("tc", "-j", "filter", "show", "dev", interface, "ingress", check=False)
    try:
        return parse_interface(addr, qdiscs, filters, interface), qdiscs
    except (ValueError, KeyError, TypeError) as exc:
        raise LinkError(f"{node.label}: {interface}: {exc}") from None


def _privilege(config: Config, role: Role, node: Node) -> Argv:
    if node.run(["id", "-u"], timeout_s=STEP_TIMEOUT_S).stdout.strip() == "0":
        return ()
    if node.run([*SUDO, "true"], timeout_s=STEP_TIMEOUT_S, check=False).ok:
        return SUDO
    node_config = config.node(role)
    key, fix = (
        ("link", "run h2iot as root")
        if node_config.is_local
        else (f"nodes.{role}.user", "connect as root")
    )
    raise ConfigError(
        f"{key}: shaping the data link needs root on {node.label} (tc and ip change "
        f"{node_config.data_interface}); {fix} or allow passwordless sudo"
    )


def _interface(config: Config, role: Role) -> str:
    node_config = config.node(role)
    if node_config.data_interface is not None:
        return node_config.data_interface
    if node_config.is_local:
        raise ConfigError(
            f"nodes.{role}.data_interface: [link] shapes the client<->server link, but local "
            "nodes talk over loopback; name the interface of this node's end of a real data "
            "link, or leave link.rate_mbit, link.loss_pct and link.delay_ms unset"
        )
    raise ConfigError(
        f"nodes.{role}.data_interface: required when [link] shapes the link: the interface of "
        f"the {role}'s end of the client<->server link (e.g. eth0)"
    )


def _open_end(config: Config, role: Role, node: Node) -> _End:
    interface = _interface(config, role)
    sudo = _privilege(config, role, node)
    exists = node.run(
        [*sudo, "ip", "link", "show", "dev", interface], timeout_s=STEP_TIMEOUT_S, check=False
    )
    if not exists.ok:
        raise ConfigError(f"nodes.{role}.data_interface: {node.label} has no interface {interface}")
    before, _ = _inspect(node, sudo, interface)
    try:
        plan = plan_end(config.link, before)
    except LinkError as exc:
        raise LinkError(f"{node.label}: {exc}") from None
    return _End(role, node, sudo, before, plan)


def _route_device(end: _End, address: str, key: str) -> str:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        found = end.node.run(["getent", "hosts", address], timeout_s=STEP_TIMEOUT_S, check=False)
        words = found.stdout.split()
        if not found.ok or not words:
            raise ConfigError(f"{key}: {end.node.label} cannot resolve {address}") from None
        address = words[0]
    route = end.output(("ip", "-j", "route", "get", address))
    try:
        return parse_route_device(route)
    except ValueError as exc:
        raise LinkError(f"{end.node.label}: {exc}") from None


def _check_routes(config: Config, client: _End, server: _End) -> None:
    """Both ends must carry the client<->server traffic, or shaping them changes nothing."""
    address = config.client.address
    device = _route_device(client, address, "nodes.client.address")
    if device != client.plan.interface:
        raise ConfigError(
            f"nodes.client.data_interface: {client.plan.interface}, but {client.node.label} "
            f"reaches nodes.client.address {address} through {device}"
        )
    if not client.before.addresses:
        return
    back = client.before.addresses[0]
    device = _route_device(server, back, "nodes.server.data_interface")
    if device != server.plan.interface:
        raise ConfigError(
            f"nodes.server.data_interface: {server.plan.interface}, but {server.node.label} "
            f"reaches the client's {client.plan.interface} address {back} through {device}"
        )


def _apply(end: _End) -> None:
    for argv in end.plan.apply:
        result = end.run(argv)
        if result.ok:
            continue
        detail = _detail(result)
        feature = next((f for f in _FEATURES if f[0] in argv), None)
        if feature is not None and any(text in detail for text in _UNSUPPORTED):
            word, key, what = feature
            hint = (
                " (Raspberry Pi OS kernels have it; between two local emulated nodes, "
                'link.delay_method = "relay" delays without it)'
                if word == "netem"
                else ""
            )
            raise ConfigError(
                f"{key}: {what} needs the kernel's {word} support, which the kernel of "
                f"{end.node.label} lacks{hint}; tc said: {detail}"
            )
        raise LinkError(f"{end.node.label}: `{shlex.join(argv)}` failed: {detail}")


def _restore(ends: list[_End]) -> list[str]:
    """Undo every end (each as far as it goes); what is still not restored, one line each."""
    problems = []
    for end in reversed(ends):
        try:
            for argv in end.plan.remove:
                end.run(argv)  # a step with nothing to undo fails harmlessly; the state decides
            after, _ = _inspect(end.node, end.sudo, end.plan.interface)
        except ControllerError as exc:
            problems.append(str(exc))
            continue
        problems += [f"{end.node.label}: {p}" for p in removal_problems(end.plan, after)]
    return problems


def _facts(link: LinkConfig, ends: list[_End]) -> dict[str, Any]:
    nodes = {}
    for end in ends:
        after, qdiscs = _inspect(end.node, end.sudo, end.plan.interface)
        plan = end.plan
        root = end.before.root
        nodes[end.role] = {
            "node": end.node.label,
            "interface": plan.interface,
            "mtu_bytes": after.mtu_bytes,
            "before": {
                "root_qdisc": root.kind if root is not None else None,
                "gso_max_segs": end.before.gso_max_segs,
                "h2iot_leftovers": end.before.our_root or end.before.our_ingress,
            },
            "commands": [shlex.join(argv) for argv in plan.apply],
            "qdiscs": qdisc_facts(qdiscs),
            "gso_max_segs": after.gso_max_segs,
            "tbf": asdict(plan.tbf) if plan.tbf is not None else None,
            "netem": asdict(plan.netem) if plan.netem is not None else None,
            "loss_probability_pct": plan.loss.probability_pct if plan.loss is not None else None,
            "tcp_goodput_bound_mbit": (
                tcp_goodput_mbit(link.rate_mbit, after.mtu_bytes)
                if link.rate_mbit is not None
                else None
            ),
        }
    return {"shaped": True, **asdict(link), "nodes": nodes}


@contextmanager
def shaped_link(config: Config, nodes: Mapping[Role, Node]) -> Iterator[dict[str, Any]]:
    """The data link shaped as `config.link` says while the block runs; yields the facts a run's
    manifest records (`{"shaped": False}` when the profile shapes nothing).

    Rate and delay go on both ends' egress, loss on both ends' ingress, each direction getting
    the same (see `controller.link.commands`). Raises ConfigError for a setup that cannot work
    (no data_interface, no root, a route around the interface, a kernel without the feature)
    and LinkError when a node refuses a command or the link cannot be restored.
    """
    link = config.link
    if not link.is_shaped:
        yield {"shaped": False}
        return
    client, server = (_open_end(config, role, nodes[role]) for role in ROLES)
    _check_routes(config, client, server)
    applied: list[_End] = []
    try:
        for end in (client, server):
            applied.append(end)
            _apply(end)
        facts = _facts(link, applied)
    except BaseException:
        _restore(applied)
        raise
    try:
        yield facts
    except BaseException:
        _restore(applied)
        raise
    problems = _restore(applied)
    if problems:
        raise LinkError(f"the data link is not restored: {'; '.join(problems)}")
