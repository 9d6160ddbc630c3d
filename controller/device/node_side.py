"""The node's half of a device emulated on an SSH node's host (`nodes.<role>.remote_device`).

Run by the controller over SSH with the node's deployed interpreter, one action per command:

    python -m controller.device.node_side create --role R --state-dir D --profile JSON [--cpu N]
    python -m controller.device.node_side status --role R --state-dir D
    python -m controller.device.node_side remove --role R --state-dir D
    python -m controller.device.node_side calibrate --profile JSON --fraction F --seconds S --cpu N

Each prints one JSON line. The cgroup is `h2iot-node-<role>-<pid>` (a name the controller-side
reaper of dead local runs leaves alone: the creating process exits at once) and is recorded in
`<state-dir>/device-<role>.json`; `create` first removes the one a dead sweep left there, as a
new sweep replaces a dead sweep's server. Errors: one line on stderr, exit 2 without root, 1
otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.config.profile import DeviceProfile, pinned_cores
from controller.device.calibrate import calibrate
from controller.device.cgroup import NodeCgroup
from controller.device.errors import EmulationError
from controller.device.hierarchy import Layout

NEEDS_ROOT_STATUS = 2


def _state_file(args: argparse.Namespace) -> Path:
    return Path(args.state_dir, f"device-{args.role}.json")


def _recorded(args: argparse.Namespace) -> NodeCgroup | None:
    """The cgroup the state file names, if any."""
    try:
        found = json.loads(_state_file(args).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise EmulationError(f"{_state_file(args)}: unreadable ({exc})") from None
    layout = found["layout"]
    return NodeCgroup.existing(
        str(found["name"]),
        DeviceProfile(**found["profile"]),
        # Where it was made: the layout of a later command's process may differ (another session).
        Layout(
            layout["version"],
            tuple((controller, parent) for controller, parent in layout["parents"]),
            layout["v2_root"],
        ),
    )


def _profile(text: str) -> DeviceProfile:
    try:
        return DeviceProfile(**json.loads(text))
    except (ValueError, TypeError) as exc:
        raise EmulationError(f"--profile: not a device profile ({exc})") from None


def create(args: argparse.Namespace) -> dict[str, Any]:
    leftover = _recorded(args)
    if leftover is not None:
        leftover.remove()
    profile = _profile(args.profile)
    try:
        cpus = pinned_cores(args.cpu, profile.cores, tuple(sorted(os.sched_getaffinity(0))))
    except ValueError as exc:
        raise EmulationError(str(exc)) from None
    cgroup = NodeCgroup.create(f"h2iot-node-{args.role}-{os.getpid()}", profile, cpus)
    try:
        Path(args.state_dir).mkdir(parents=True, exist_ok=True)
        _state_file(args).write_text(
            json.dumps(
                {"name": cgroup.name, "profile": asdict(profile), "layout": asdict(cgroup.layout)}
            )
        )
    except OSError as exc:
        cgroup.remove()
        raise EmulationError(f"{_state_file(args)}: cannot write ({exc.strerror})") from None
    return {
        "name": cgroup.name,
        "version": cgroup.layout.version,
        "cpus": list(cpus),
        "procs_files": [str(path) for path in cgroup.procs_files],
        "oom_kills_file": str(cgroup.oom_kills_file) if profile.memory_mib is not None else None,
    }


def status(args: argparse.Namespace) -> dict[str, Any]:
    cgroup = _recorded(args)
    if cgroup is None:
        raise EmulationError(f"{_state_file(args)}: no device cgroup recorded")
    return {
        "oom_kills": cgroup.oom_kills(),
        "cpu_s": cgroup.cpu_seconds(),
        "memory_peak_bytes": cgroup.memory_peak_bytes(),
        "throttling": cgroup.throttling(),
    }


def remove(args: argparse.Namespace) -> dict[str, Any]:
    cgroup = _recorded(args)
    if cgroup is not None:
        cgroup.remove()
        _state_file(args).unlink(missing_ok=True)
    return {"removed": None if cgroup is None else cgroup.name}


def calibrate_here(args: argparse.Namespace) -> dict[str, Any]:
    result = calibrate(_profile(args.profile), args.fraction, args.seconds, args.cpu, "node")
    return asdict(result)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m controller.device.node_side")
    actions = parser.add_subparsers(dest="action", required=True)
    for name, handler in (("create", create), ("status", status), ("remove", remove)):
        action = actions.add_parser(name)
        action.add_argument("--role", required=True, choices=("client", "server"))
        action.add_argument("--state-dir", required=True)
        if name == "create":
            action.add_argument("--profile", required=True)
            action.add_argument("--cpu", type=int)
        action.set_defaults(handler=handler)
    action = actions.add_parser("calibrate")
    action.add_argument("--profile", required=True)
    action.add_argument("--fraction", type=float, required=True)
    action.add_argument("--seconds", type=float, required=True)
    action.add_argument("--cpu", type=int, required=True)
    action.set_defaults(handler=calibrate_here)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if os.geteuid() != 0:
        print(
            "h2iot node: error: emulating a device needs root on this host (cgroups for its CPU "
            "and memory); connect as root",
            file=sys.stderr,
        )
        return NEEDS_ROOT_STATUS
    try:
        print(json.dumps(args.handler(args)))
    except EmulationError as exc:
        print(f"h2iot node: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
