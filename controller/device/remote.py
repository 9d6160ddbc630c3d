"""A device emulated on an SSH node's host (`nodes.<role>.remote_device`): the controller's half.

Each step runs `controller.device.node_side` on the node with its deployed interpreter (the
project's wheel carries it): calibrate the quota on the node's own core, make the cgroup there,
remove it. The node's commands then join that cgroup as a local node's do
(`controller.device.transport`), so the agent and the nghttp2 tools it starts are all inside.
OOM kills, read around every trial, come from `cat` of the counters file `create` named: an
interpreter started twice per trial would cost a Pi about a second each time.
Needs root on the node: a cgroup every command joins cannot be reached through sudo.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from controller.config.model import NodeConfig
from controller.config.profile import DeviceProfile
from controller.device.calibrate import Calibration, ProbeRun, parse_probe
from controller.device.cgroup import oom_kill_count
from controller.device.errors import EmulationError
from controller.errors import ConfigError
from controller.nodes.node import Node

NODE_SIDE = "controller.device.node_side"
STEP_TIMEOUT_S = 60.0
CALIBRATE_TIMEOUT_S = 300.0


def _node_side(node: Node, python: str, argv: list[str], timeout_s: float) -> Any:
    """One node-side action's JSON answer; its error line, with the node named, otherwise."""
    result = node.run([node.path(python), "-m", NODE_SIDE, *argv], timeout_s=timeout_s, check=False)
    lines = result.stdout.strip().splitlines()
    if not result.ok or not lines:
        detail = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        detail = detail.removeprefix("h2iot node: error: ")
        raise EmulationError(f"{node.label}: device {argv[0]}: {detail}")
    return json.loads(lines[-1])


def require_root(node: Node, config: NodeConfig) -> None:
    """ConfigError naming nodes.<role>.user unless the node's commands run as root."""
    if node.run(["id", "-u"], timeout_s=STEP_TIMEOUT_S).stdout.strip() != "0":
        raise ConfigError(
            f"nodes.{config.role}.user: emulating a device on {node.label} needs root there (a "
            "cgroup that every command of the node joins); connect as root, or unset "
            f"nodes.{config.role}.remote_device"
        )


def calibrate_on(
    node: Node, config: NodeConfig, profile: DeviceProfile, fraction: float, seconds: float
) -> Calibration:
    """`controller.device.calibrate.calibrate` on the node, on its first pinned core."""
    argv = ["calibrate", "--profile", json.dumps(asdict(profile)), "--fraction", str(fraction)]
    argv += ["--seconds", str(seconds), "--cpu", str(config.cpu or 0)]
    found = _node_side(node, config.python, argv, CALIBRATE_TIMEOUT_S)
    return Calibration.from_dict(found)


def probe_on(node: Node, python: str, seconds: float) -> ProbeRun:
    """The calibration probe through the node's commands: inside its cgroup if they join one,
    else (an unwrapped node) its host's own speed."""
    argv = [node.path(python), "-m", "controller.device.probe", "--seconds", str(seconds)]
    output = node.run(argv, timeout_s=CALIBRATE_TIMEOUT_S).stdout.strip()
    return parse_probe(output.splitlines()[-1], None)


@dataclass
class RemoteCgroup:
    """A node's cgroup on its SSH host, as the sweep sees it (the same reads as `NodeCgroup`).

    `node` is the node's own, unwrapped: node-side actions run outside the cgroup."""

    node: Node
    config: NodeConfig
    state_dir: str
    profile: DeviceProfile
    name: str
    version: int
    cpus: tuple[int, ...]
    procs_files: tuple[str, ...]
    oom_kills_file: str | None  # None without a memory limit

    @classmethod
    def create(
        cls, node: Node, config: NodeConfig, profile: DeviceProfile, state_dir: str
    ) -> RemoteCgroup:
        state_dir = node.path(state_dir)
        argv = ["create", "--role", config.role, "--state-dir", state_dir]
        argv += ["--profile", json.dumps(asdict(profile))]
        argv += ["--cpu", str(config.cpu)] if config.cpu is not None else []
        found = _node_side(node, config.python, argv, STEP_TIMEOUT_S)
        return cls(
            node,
            config,
            state_dir,
            profile,
            str(found["name"]),
            int(found["version"]),
            tuple(found["cpus"]),
            tuple(found["procs_files"]),
            found["oom_kills_file"],
        )

    def _args(self, action: str) -> list[str]:
        return [action, "--role", self.config.role, "--state-dir", self.state_dir]

    def status(self) -> dict[str, Any]:
        """OOM kills, CPU seconds, peak memory and CFS throttling so far (node_side status)."""
        found: dict[str, Any] = _node_side(
            self.node, self.config.python, self._args("status"), STEP_TIMEOUT_S
        )
        return found

    def oom_kills(self) -> int:
        if self.oom_kills_file is None:
            return 0
        result = self.node.run(["cat", self.oom_kills_file], timeout_s=STEP_TIMEOUT_S, check=False)
        if not result.ok:
            raise EmulationError(
                f"{self.node.label}: cannot read {self.oom_kills_file}: "
                f"{result.stderr.strip() or f'cat exited {result.exit_status}'}"
            )
        return oom_kill_count(result.stdout)

    def remove(self) -> None:
        _node_side(self.node, self.config.python, self._args("remove"), STEP_TIMEOUT_S)
