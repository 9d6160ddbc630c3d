"""`h2iot nodes calibrate [CONFIG]`: the CPU quota that makes this machine's core as fast as the
emulated device's (a Raspberry Pi 3B for the rpi3b profile).

Runs the calibration probe (HTTP/2 framing and HPACK through h2, and a hash loop) unthrottled,
then in a cgroup under quotas around the profile's nominal speed fraction, and reports each
one's speed against the reference device's (`controller.device.calibrate`). Calibrates the
profile of each node with a device in CONFIG on that node's core: a local node's here, an SSH
node's (remote_device) on its host, over SSH; without one, rpi3b on core 0 here. Needs root
(cgroups), on the node's host for an SSH node. Put the quota it prints into the config's device
table.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from controller.cli._help import FORMATTER, example
from controller.cli._options import add_overrides
from controller.config import load_config
from controller.config.model import ROLES, NodeConfig
from controller.config.profile import MIN_QUOTA_US, PI3B_CORE_FRACTION, PROFILES, DeviceProfile
from controller.device.calibrate import Calibration, calibrate
from controller.device.remote import calibrate_on, require_root
from controller.errors import ConfigError
from controller.nodes.connect import connect, node_label

DEFAULT_SECONDS = 2.0


def add_calibrate(actions: Any) -> argparse.ArgumentParser:
    """The `calibrate` action of `h2iot nodes`; its handler is set by the caller."""
    parser: argparse.ArgumentParser = actions.add_parser(
        "calibrate",
        help="measure the CPU quota that makes this machine's core as fast as a Pi 3B's",
        description=__doc__,
        epilog=example("h2iot nodes calibrate configs/local-rpi3b.toml --seconds 5"),
        formatter_class=FORMATTER,
    )
    parser.add_argument("config", type=Path, nargs="?", help="the sweep's TOML config")
    add_overrides(parser)
    parser.add_argument(
        "--reference-fraction",
        type=float,
        help=(
            "the reference device's core as a share of this machine's "
            f"(default: the profile's; rpi3b {PI3B_CORE_FRACTION:g}, from published figures)"
        ),
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help="wall time per probe run (default: %(default)s)",
    )
    return parser


@dataclass(frozen=True)
class _Target:
    what: str
    profile: DeviceProfile
    core: int
    node: NodeConfig | None = None  # an SSH node with remote_device: calibrated on its host


def _targets(args: argparse.Namespace) -> list[_Target]:
    if args.config is None:
        return [_Target("rpi3b", PROFILES["rpi3b"], 0)]
    config = load_config(args.config, args.overrides)
    targets = []
    for role in ROLES:
        node = config.node(role)
        if node.device is not None:
            what = f"nodes.{role} ({node.device.profile})"
            core = node.cpu if node.cpu is not None else 0
            remote = None if node.is_local else node
            targets.append(_Target(what, node.device, core, remote))
    return targets or [_Target("rpi3b", PROFILES["rpi3b"], 0)]


def _fraction(args: argparse.Namespace, profile: DeviceProfile) -> float:
    if args.reference_fraction is not None:
        if not 0 < args.reference_fraction <= 1:
            raise ConfigError(f"--reference-fraction {args.reference_fraction:g}: not in (0, 1]")
        return float(args.reference_fraction)
    if profile.speed_fraction is None:
        raise ConfigError(
            f"profile {profile.profile} has no speed_fraction to calibrate to; give "
            "--reference-fraction"
        )
    return profile.speed_fraction


def _report(console: Console, what: str, profile: DeviceProfile, result: Calibration) -> None:
    table = Table(title=f"{what}: period {profile.cpu_period_us} us", title_justify="left")
    for column in ("quota", "probe units/s", "share of this core", "vs reference"):
        table.add_column(column, justify="right")
    host = result.host.units_per_cpu_s
    table.add_row("none", f"{host:.0f} per CPU s", "1", f"{1 / result.reference_fraction:.2f}")
    for run in result.candidates:
        speed = run.units_per_wall_s
        table.add_row(
            f"{run.quota:g}",
            f"{speed:.1f}",
            f"{speed / host:.4f}",
            f"{speed / result.reference_units_per_s:.2f}",
        )
    console.print(table)
    console.print(
        f"reference device: {result.reference_fraction:g} of this core = "
        f"{result.reference_units_per_s:.1f} units/s; quota that matches it: "
        f"{result.quota:.4f}",
        soft_wrap=True,
    )
    if result.quota * profile.cpu_period_us < MIN_QUOTA_US:
        console.print(f"(below the kernel's {MIN_QUOTA_US} us per period: raise cpu_period_us)")
    console.print(
        f'  device = {{profile = "{profile.profile}", cpu_quota = {result.quota:.4f}}}',
        markup=False,
    )


def _on_node(target: _Target, fraction: float, seconds: float) -> Calibration:
    """The calibration run on an SSH node's host (needs a root login there)."""
    assert target.node is not None
    node = connect(target.node)
    try:
        require_root(node, target.node)
        return calibrate_on(node, target.node, target.profile, fraction, seconds)
    finally:
        node.close()


def calibrate_nodes(args: argparse.Namespace, console: Console) -> int:
    targets = _targets(args)
    if args.seconds <= 0:
        raise ConfigError(f"--seconds {args.seconds:g}: must be positive")
    if os.geteuid() != 0 and any(target.node is None for target in targets):
        raise ConfigError(
            "nodes calibrate: measuring under a CPU quota needs root (cgroups); run it as root"
        )
    for target in targets:
        fraction = _fraction(args, target.profile)
        if target.node is None:
            result = calibrate(target.profile, fraction, args.seconds, target.core)
            where = "this machine"
        else:
            result = _on_node(target, fraction, args.seconds)
            where = node_label(target.node)
        _report(console, f"{target.what} on {where}", target.profile, result)
    return 0
