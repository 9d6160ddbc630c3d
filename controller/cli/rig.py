"""`h2iot rig check CONFIG`: one line per check of the bench the config describes, PASS, WARN,
FAIL or UNAVAILABLE, and after an arrow what to do about it.

The meter: its serial port exists and this user may open it (dialout); the board's identity
and firmware against this build; samples at the configured rate with no gaps; each channel's
zero offset (from meter.calibration) and the nodes' idle power; the marker loop (the client
node pulses its marker for 200 ms; the meter must stamp both edges within 2 s, the pulse's
width within 20 ms of the node's). Each node: SSH reach and host key, agent and Python
versions, the clock offset and its uncertainty, CPU governor and clock, temperature, the
Raspberry Pi firmware's throttling flags, memory and swap, other processes using CPU. With
HTTP/3 trials (protocol "h3"): the client's 1200-byte UDP datagrams to an echo listener held on
the server's HTTP/3 port (`controller.nodes.udp_reach`): an echo passes; ICMP port unreachable,
silence, a send error or a port another process holds fail.

With `meter.source = "ppk2"` the meter's lines are the PPK2's (controller/meter_sources/ppk2/):
its port (a real one, or the emulated PPK2's pty following the local client); its identity
from the metadata reply (hardware id, calibrated or not, VDD, mode), parsed strictly; the
100 kS/s stream, every sample accounted for by its counter; the client's idle power; the marker
loop on its logic input (D0 by default), both edges inside the sample words.

What this platform lacks (a local node's SSH, a virtual meter's firmware, a governor without
cpufreq) is UNAVAILABLE, never a pass. Exit status 1 when any check fails, else 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.cli._options import add_accept_new_host_key, add_overrides
from controller.config import load_config
from controller.errors import ConfigError, ControllerError
from controller.rig import Check, check_rig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rig",
        help=COMMANDS["rig"],
        description=__doc__,
        epilog=example("h2iot rig check configs/local.toml"),
        formatter_class=FORMATTER,
    )
    actions = parser.add_subparsers(dest="rig_action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="one line per check, and the fix",
        description=__doc__,
        epilog=example("h2iot rig check configs/study.toml --marker gpio:gpiochip0:17"),
        formatter_class=FORMATTER,
    )
    check.add_argument("config", type=Path, help="the sweep's TOML config")
    add_overrides(check)
    check.add_argument(
        "--marker",
        metavar="SPEC",
        help="the client's marker line, gpio:CHIP:LINE for a wired GPIO (default: the "
        "software line to a modelled meter when the client is local, else none)",
    )
    check.add_argument(
        "--seconds", type=float, default=2.0, help="how long the meter streams (default 2)"
    )
    add_accept_new_host_key(check)
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    found: list[Check] = []

    def emit(check: Check) -> None:
        found.append(check)
        print(check.line(), flush=True)

    try:
        config = load_config(args.config, args.overrides)
        if args.seconds <= 0:
            raise ConfigError(f"--seconds {args.seconds}: must be more than 0")
        check_rig(
            config,
            emit,
            marker=args.marker,
            accept_new_host_key=args.accept_new_host_key,
            seconds=args.seconds,
        )
    except ControllerError as exc:
        print(f"h2iot: error: {exc}", file=sys.stderr)
        return exc.exit_status
    failed = [c for c in found if c.failed]
    counts = {s: sum(c.status == s for c in found) for s in ("pass", "warn", "fail", "unavailable")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return 1 if failed else 0
