"""A device emulated on an SSH node's host, through the node's own commands
(`controller.device.remote` driving `controller.device.node_side`). A local node stands in for
the SSH node here (the same commands over another transport); tests/e2e/test_ssh_sweep.py runs
it over real SSH. Needs root, like the node's host does."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from controller.config.model import NodeConfig
from controller.config.profile import PROFILES, DeviceProfile
from controller.device import node_side
from controller.device.errors import EmulationError
from controller.device.remote import RemoteCgroup, calibrate_on, require_root
from controller.device.transport import CgroupTransport
from controller.errors import ConfigError
from controller.nodes.node import Node
from controller.nodes.records import CommandResult
from controller.nodes.transport import LocalTransport
from tests.conftest import require_tool
from tests.netns import require_root as require_test_root

CONFIG = NodeConfig(role="server", python=sys.executable, cpu=1)


def _cgroups_of_self(node: Node) -> str:
    return node.run(["cat", "/proc/self/cgroup"]).stdout


def test_the_node_side_cgroup_holds_every_command_and_a_new_sweep_replaces_a_dead_ones(
    tmp_path: Path,
) -> None:
    require_test_root()
    node = Node(LocalTransport("server (stand-in)"))
    profile = DeviceProfile(cpu_quota=0.5, memory_mib=256)
    state = str(tmp_path / "state")
    dead = RemoteCgroup.create(node, CONFIG, profile, state)  # a sweep that died: never removed
    cgroup = RemoteCgroup.create(node, CONFIG, profile, state)
    try:
        assert cgroup.name.startswith("h2iot-node-server-") and cgroup.name != dead.name
        assert not any(Path(p).exists() for p in dead.procs_files)
        assert cgroup.cpus == (1,)
        inside = Node(CgroupTransport(node.transport, cgroup.procs_files))
        joined = _cgroups_of_self(inside)
        assert f"/{cgroup.name}" in joined and f"/{cgroup.name}" not in _cgroups_of_self(node)
        inside.run([sys.executable, "-c", "sum(range(3_000_000))"])
        found = cgroup.status()
        assert found["oom_kills"] == 0 and found["cpu_s"] > 0
        assert found["memory_peak_bytes"] > 0
        assert cgroup.oom_kills() == 0
        hog = inside.run([sys.executable, "-c", "bytearray(400 * 2**20)"], check=False)
        assert hog.exit_status != 0
        # Read with cat around every trial; the node side's own count agrees.
        assert cgroup.oom_kills() == 1 == cgroup.status()["oom_kills"]
    finally:
        cgroup.remove()
    assert not any(Path(p).parent.exists() for p in cgroup.procs_files)
    assert not (tmp_path / "state" / "device-server.json").exists()
    cgroup.remove()  # nothing left to remove: no error


@pytest.mark.quiet
def test_the_quota_is_calibrated_on_the_node() -> None:
    require_test_root()
    node = Node(LocalTransport("server (stand-in)"))
    result = calibrate_on(node, CONFIG, PROFILES["rpi3b"], 0.08, 0.3)
    assert result.reference_fraction == 0.08
    assert [run.quota for run in result.candidates] == pytest.approx([0.06, 0.08, 0.12])
    assert 0.04 < result.quota < 0.2


class _AsNobody(LocalTransport):
    """A node whose login is not root."""

    def run(self, command: str, timeout_s: float) -> CommandResult:
        drop = "setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c"
        return super().run(f"{drop} {shlex.quote(command)}", timeout_s)


def test_without_root_on_the_node_one_line_says_what_needs_it() -> None:
    require_test_root()  # to become nobody
    require_tool("setpriv")
    node = Node(_AsNobody("server (nobody@pi:22)"))
    with pytest.raises(ConfigError) as caught:
        require_root(node, CONFIG)
    assert str(caught.value) == (
        "nodes.server.user: emulating a device on server (nobody@pi:22) needs root there (a "
        "cgroup that every command of the node joins); connect as root, or unset "
        "nodes.server.remote_device"
    )


def test_the_node_side_refuses_to_run_without_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    argv = ["create", "--role", "client", "--state-dir", str(tmp_path), "--profile", "{}"]
    assert node_side.main(argv) == node_side.NEEDS_ROOT_STATUS
    assert capsys.readouterr().err == (
        "h2iot node: error: emulating a device needs root on this host (cgroups for its CPU and "
        "memory); connect as root\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_oom_kills_without_a_memory_limit_are_none_and_an_unreadable_counter_is_named(
    tmp_path: Path,
) -> None:
    node = Node(LocalTransport("server (stand-in)"))
    fields = {"node": node, "config": CONFIG, "state_dir": str(tmp_path), "name": "h2iot-x"}
    fields |= {"version": 1, "cpus": (1,), "procs_files": ()}
    unlimited = RemoteCgroup(**fields, profile=DeviceProfile(), oom_kills_file=None)  # type: ignore[arg-type]
    assert unlimited.oom_kills() == 0
    missing = str(tmp_path / "gone" / "memory.oom_control")
    limited = RemoteCgroup(**fields, profile=DeviceProfile(memory_mib=64), oom_kills_file=missing)  # type: ignore[arg-type]
    with pytest.raises(EmulationError) as failure:
        limited.oom_kills()
    assert str(failure.value).startswith(f"server (stand-in): cannot read {missing}: ")
    assert "\n" not in str(failure.value)
    counters = tmp_path / "memory.events"
    counters.write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    found = RemoteCgroup(
        **fields, profile=DeviceProfile(memory_mib=64), oom_kills_file=str(counters)
    )  # type: ignore[arg-type]
    assert found.oom_kills() == 2
