"""`h2iot nodes deploy|check CONFIG`: put the agent on the config's nodes, and check them.
`h2iot nodes calibrate [CONFIG]`: the CPU quota that makes a local core as fast as a Pi 3B's.

deploy builds this project's wheel (or takes --wheel), downloads the agent's dependencies, and
those of the pip extra of the config's workload, for each SSH node's platform on this machine
(nodes need no package index), copies the wheels, creates or reuses `<deploy_dir>/venv` with
the agent and those dependencies only, and checks that `h2iot-agent --version` there matches
this controller. Local nodes run from this installation. An engine whose tools are the
distribution's (nghttp2: nghttp and nghttpd, over HTTP/3 ngtcp2's gtlsclient and gtlsserver)
needs them on the node first: a missing one fails that node's deploy in one line naming the
Debian package to install (root's to do; the deploy installs nothing system-wide). check
reports them too.

check reports per node: reachability, Python, agent version, CPU model and the clock offset
with its uncertainty (best of many round trips over one SSH channel; 0 for local nodes). With
HTTP/3 trials (protocol "h3"), per client -> server pair: whether the client node's 1200-byte
UDP datagrams reach an echo listener the check holds on the server's HTTP/3 port
(nodes.server.http_port; a free one for a local server, as a local sweep's) at
nodes.<client>.address: echo, ICMP port unreachable (nothing listens at that address), silence
(dropped on the way there or back), or a send error, one line naming the nodes, address and port.

SSH host keys are checked against each node's known_hosts file; an unknown host is refused
unless --accept-new-host-key records its key (printing the fingerprint to compare); a changed
key is always refused.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent import __version__
from agent.protocols import protocol_spec
from agent.workloads import spec_of
from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.cli._nodes_calibrate import add_calibrate, calibrate_nodes
from controller.cli._options import add_accept_new_host_key, add_overrides
from controller.config import Config, NodeConfig, load_config
from controller.config.model import ROLES
from controller.errors import ConfigError, ControllerError
from controller.nodes.connect import connect, node_label
from controller.nodes.deploy import DeployReport, install, probe_platform
from controller.nodes.errors import DeployError, NodeError
from controller.nodes.facts import NodeFacts, check_node, engine_tools
from controller.nodes.group import fan_out
from controller.nodes.node import Node
from controller.nodes.platform import PlatformFacts
from controller.nodes.records import ClockOffset
from controller.nodes.udp_reach import UdpReach, probe_udp, udp_pairs
from controller.nodes.wheel import (
    Wheel,
    build_wheel,
    download_dependencies,
    project_root,
)

DEFAULT_BASE_PYTHON = "/usr/bin/python3"


def _default_wheelhouse() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "h2iot" / "wheelhouse"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "nodes",
        help=COMMANDS["nodes"],
        description=__doc__,
        epilog=example("h2iot nodes check configs/study.toml"),
        formatter_class=FORMATTER,
    )
    actions = parser.add_subparsers(dest="nodes_action", metavar="ACTION", required=True)
    deploy = actions.add_parser(
        "deploy",
        help="install the agent into each SSH node's venv",
        description=__doc__,
        epilog=example("h2iot nodes deploy configs/study.toml --accept-new-host-key"),
        formatter_class=FORMATTER,
    )
    check = actions.add_parser(
        "check",
        help="report each node's facts and clock offset",
        description=__doc__,
        epilog=example("h2iot nodes check configs/study.toml --clock-samples 500"),
        formatter_class=FORMATTER,
    )
    for action in (deploy, check):
        action.add_argument("config", type=Path, help="the sweep's TOML config")
        add_overrides(action)
        add_accept_new_host_key(action)
    deploy.add_argument("--wheel", type=Path, help="deploy this wheel instead of building one")
    deploy.add_argument(
        "--wheelhouse",
        type=Path,
        default=_default_wheelhouse(),
        help="where dependency wheels are kept per node platform (default: %(default)s)",
    )
    deploy.add_argument(
        "--base-python",
        default=DEFAULT_BASE_PYTHON,
        help="the node's interpreter that creates the venv (default: %(default)s)",
    )
    check.add_argument(
        "--clock-samples", type=int, default=200, help="round trips per clock offset"
    )
    deploy.set_defaults(handler=_guarded(_deploy))
    check.set_defaults(handler=_guarded(_check))
    add_calibrate(actions).set_defaults(handler=_guarded(calibrate_nodes))


def _guarded(action: Callable[[argparse.Namespace, Console], int]) -> Callable[..., int]:
    def handler(args: argparse.Namespace) -> int:
        console = Console(highlight=False)
        try:
            return action(args, console)
        except ControllerError as exc:
            _error(str(exc))
            return exc.exit_status

    return handler


def _error(message: str) -> None:
    sys.stdout.flush()  # the report printed so far comes first
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"h2iot: error: {message}", markup=False
    )


def _nodes(config: Config) -> dict[str, NodeConfig]:
    nodes = {role: config.node(role) for role in ROLES}
    # nodes.clients: the first is nodes.client (the metered one); the others by name.
    return nodes | {str(node.name): node for node in config.clients[1:]}


def _report_failures(failed: Mapping[str, ControllerError]) -> int:
    for error in failed.values():
        _error(str(error))
    return max((error.exit_status for error in failed.values()), default=0)


def _deploy(args: argparse.Namespace, console: Console) -> int:
    config = load_config(args.config, args.overrides)
    nodes = _nodes(config)
    extras = node_extras(config)
    remote: dict[str, NodeConfig] = {}
    for role, node in nodes.items():
        if node.is_local:
            console.print(f"{node_label(node)}: local, runs from this controller's installation")
            continue
        # Two roles on one host and directory share one venv: deploy it once.
        if all(_deploy_target(n) != _deploy_target(node) for n in remote.values()):
            remote[role] = node
    if not remote:
        return 0
    # Connecting first fails fast on unreachable nodes and unknown host keys, before the build.
    connected = fan_out(
        remote,
        lambda config: (
            config,
            connect(
                config,
                accept_new_host_key=args.accept_new_host_key,
                on_new_host_key=console.print,
            ),
        ),
    )
    try:
        if not connected.succeeded:
            return _report_failures(connected.failed)
        with tempfile.TemporaryDirectory(prefix="h2iot-wheel-") as scratch:
            wheel = _wheel(args.wheel, Path(scratch))
            requirements = wheel.requirements(extras)
            with_extra = f" with the extras {', '.join(extras)}" if extras else ""
            console.print(
                f"deploying {wheel.path.name}{with_extra} (needs {', '.join(requirements)})"
            )
            deployer = _deployer(args, wheel, extras, list(nodes.values()), config.protocols)
            outcome = fan_out(connected.succeeded, deployer)
    finally:
        for _, opened in connected.succeeded.values():
            opened.close()
    if outcome.succeeded:
        console.print(_deploy_table(outcome.succeeded))
    for role, report in outcome.succeeded.items():
        if not report.config_uses_venv:
            console.print(
                f"note: nodes.{role}.python is {remote[role].python}, not this venv's "
                f"{report.venv}/bin/python: sweeps run the agent with the configured one"
            )
    return _report_failures({**connected.failed, **outcome.failed})


def _wheel(given: Path | None, scratch: Path) -> Wheel:
    if given is not None:
        wheel = Wheel.read(given)
    else:
        root = project_root()
        if root is None:
            raise ConfigError("no project source tree next to this controller: pass --wheel FILE")
        wheel = build_wheel(root, scratch)
    if wheel.version != __version__:
        raise ConfigError(f"{wheel.path}: version {wheel.version}, the controller is {__version__}")
    return wheel


def node_extras(config: Config) -> tuple[str, ...]:
    """The pip extras a node needs for the config: its workload's, h3 for HTTP/3 trials, and
    uvloop for a client or a server on that event loop."""
    workload = spec_of(config.workload.kind).extra
    return (
        *((workload,) if workload else ()),
        *dict.fromkeys(
            extra for p in config.protocols if (extra := protocol_spec(p).extra) is not None
        ),
        *(("uvloop",) if "uvloop" in (config.run.event_loop, config.run.server_event_loop) else ()),
    )


def _deploy_target(node: NodeConfig) -> tuple[object, ...]:
    return (node.host, node.port, node.user, node.deploy_dir)


def _deployer(
    args: argparse.Namespace,
    wheel: Wheel,
    extras: tuple[str, ...],
    nodes: list[NodeConfig],
    protocols: tuple[str, ...],
) -> Callable[[tuple[NodeConfig, Node]], DeployReport]:
    lock = threading.Lock()
    downloaded: dict[str, list[Path]] = {}

    def dependencies(platform: PlatformFacts) -> list[Path]:
        # One download per platform, shared by the nodes on it.
        with lock:
            if platform.key not in downloaded:
                downloaded[platform.key] = download_dependencies(
                    wheel, platform, args.wheelhouse, extras
                )
            return downloaded[platform.key]

    def deploy_one(target: tuple[NodeConfig, Node]) -> DeployReport:
        config, node = target
        # The engine's Debian packages are not the agent's to install (they need root on the
        # node): a missing one fails the deploy first, naming the package.
        for role_config in nodes:
            if _deploy_target(role_config) == _deploy_target(config):
                engine_tools(node, role_config, protocols)
        platform = probe_platform(node, args.base_python)
        try:
            wheels = dependencies(platform)
        except DeployError as exc:
            raise DeployError(str(exc), label=node.label) from None
        return install(
            node,
            config,
            wheel=wheel,
            requirements=wheel.requirements(extras),
            dependencies=wheels,
            base_python=args.base_python,
            platform=platform,
            expected_version=__version__,
        )

    return deploy_one


def _deploy_table(reports: Mapping[str, DeployReport]) -> Table:
    table = Table(title="deployed")
    for heading in ("node", "python", "agent", "venv", "venv was"):
        table.add_column(heading)
    for report in reports.values():
        table.add_row(
            report.label,
            report.python_version,
            report.agent_version,
            report.venv,
            "reused" if report.venv_reused else "created",
        )
    return table


def _check(args: argparse.Namespace, console: Console) -> int:
    if args.clock_samples < 1:
        raise ConfigError(f"--clock-samples {args.clock_samples}: must be at least 1")
    config = load_config(args.config, args.overrides)
    nodes = _nodes(config)
    protocols = config.protocols

    def check_one(config: NodeConfig) -> NodeFacts:
        return check_node(
            config,
            expected_version=__version__,
            accept_new_host_key=args.accept_new_host_key,
            on_new_host_key=console.print,
            clock_samples=args.clock_samples,
            protocols=protocols,
        )

    facts = fan_out(nodes, check_one).raise_on_failure()
    console.print(_check_table(list(facts.values())))
    problems = [problem for fact in facts.values() for problem in fact.problems]
    reaches = _udp_reaches(config, list(facts.values()), args.accept_new_host_key)
    if reaches:
        console.print(_udp_table(reaches))
    problems += [problem for reach in reaches if (problem := reach.problem()) is not None]
    for problem in problems:
        _error(problem)
    return 1 if problems else 0


def _udp_reaches(
    config: Config, facts: list[NodeFacts], accept_new_host_key: bool
) -> list[UdpReach]:
    """Per client -> server pair of a config with HTTP/3 trials, whether the client's datagrams
    reach the server's UDP port; pairs with a node that did not check out are not probed."""
    working = {fact.label for fact in facts if fact.python_version is not None}

    def probe(client: NodeConfig, server: NodeConfig) -> UdpReach:
        missing = [node_label(n) for n in (client, server) if node_label(n) not in working]
        if missing:
            why = f"{' and '.join(missing)}: no working Python (see above)"
            return UdpReach.of_pair(client, server, "not probed", why)
        with ExitStack() as stack:
            try:
                nodes = [
                    stack.enter_context(
                        closing(connect(n, accept_new_host_key=accept_new_host_key))
                    )
                    for n in (client, server)
                ]
            except NodeError as exc:
                return UdpReach.of_pair(client, server, "error", str(exc))
            return probe_udp(nodes[0], client, nodes[1], server)

    return [probe(client, server) for client, server in udp_pairs(config)]


def _udp_table(reaches: list[UdpReach]) -> Table:
    table = Table(title="HTTP/3: UDP from each client to the server's port")
    for heading in ("client", "server", "reaches", "found"):
        table.add_column(heading)
    for reach in reaches:
        verdict = {"echo": "yes", "not probed": "-"}.get(reach.finding, "no")
        table.add_row(reach.client, reach.server, verdict, f"{reach.finding}: {reach.detail()}")
    return table


def _clock_text(clock: ClockOffset | None) -> str:
    if clock is None:
        return "-"
    if clock.samples == 0:
        return "0 (same clock)"
    return (
        f"{clock.wall_offset_ns / 1e6:+.3f} ms ± {clock.uncertainty_ns / 1e6:.3f} ms "
        f"(best round trip {clock.best_round_trip_ns / 1e6:.3f} ms)"
    )


def _check_table(facts: list[NodeFacts]) -> Table:
    table = Table(title=f"nodes (controller {__version__})")
    for heading in ("node", "reachable", "python", "agent", "CPU", "clock offset (wall)"):
        table.add_column(heading)
    for fact in facts:
        table.add_row(
            fact.label,
            "yes" if fact.reachable else "no",
            fact.python_version or "-",
            fact.agent_version or "-",
            fact.cpu_model or "-",
            _clock_text(fact.clock),
        )
    return table
