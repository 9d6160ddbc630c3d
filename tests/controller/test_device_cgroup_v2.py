"""Making, reading and removing a node's cgroup under cgroup v2, on a v2-shaped directory tree.

This host binds cpu and memory to cgroup v1 (tests/controller/test_device_cgroup.py runs the v1
path for real), so the v2 path runs here against plain directories laid out as a v2 hierarchy:
the layout found from a v2 mountinfo line that points at the tree, the controllers enabled at
the root and in the shared h2iot parent, the node's directory and every limit written into it,
stale node cgroups reaped, a process moved in, the counters read, the directory removed. What a
v2 host adds: the kernel's control files appear by themselves (so optional ones such as
memory.swap.max are written, not skipped), writing subtree_control can be refused (a cgroup with
processes in it, a controller not offered), the limits are enforced, and rmdir works while the
control files are there (here the test deletes them first, as the kernel would hide them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.config.profile import DeviceProfile
from controller.device.cgroup import NodeCgroup
from controller.device.errors import EmulationError
from controller.device.hierarchy import find_layout

CONTROLLERS = "cpuset cpu io memory pids\n"
PROFILE = DeviceProfile(cpu_quota=0.09, cpu_period_us=20_000, memory_mib=64)


@pytest.fixture
def v2_root(tmp_path: Path) -> Path:
    """A v2 hierarchy's root as the kernel shows it, with a shared parent already there."""
    root = tmp_path / "cgroup"
    (root / "h2iot").mkdir(parents=True)
    (root / "cgroup.controllers").write_text(CONTROLLERS)
    (root / "cgroup.subtree_control").write_text("")
    (root / "h2iot" / "cgroup.subtree_control").write_text("")
    (root / "h2iot" / "cpuset.mems").write_text("0\n")
    return root


def _layout(root: Path):
    mountinfo = f"29 23 0:26 / {root} rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n"
    return find_layout(mountinfo, "0::/user.slice/session-2.scope\n", CONTROLLERS)


def test_a_node_cgroup_is_made_with_the_profiles_v2_limits(v2_root: Path) -> None:
    layout = _layout(v2_root)
    assert layout.version == 2
    cgroup = NodeCgroup.create("h2iot-1-client", PROFILE, (1,), layout=layout)
    node = v2_root / "h2iot" / "h2iot-1-client"
    # The controllers are handed down from the root to the shared parent to the nodes.
    assert (v2_root / "cgroup.subtree_control").read_text() == "+cpu +cpuset +memory"
    assert (v2_root / "h2iot" / "cgroup.subtree_control").read_text() == "+cpu +cpuset +memory"
    written = {path.name: path.read_text() for path in node.iterdir()}
    assert written == {
        "cpuset.cpus": "1",
        "cpu.max": "1800 20000",  # 0.09 of a core per 20 ms period
        "cpu.weight": "1000",
        "memory.max": str(64 << 20),
    }  # memory.swap.max is optional: a kernel without swap accounting has none
    assert cgroup.procs_files == (node / "cgroup.procs",)
    assert cgroup.usage_directory == node
    assert cgroup.oom_kills_file == node / "memory.events"


def test_counters_are_read_from_the_v2_files(v2_root: Path) -> None:
    cgroup = NodeCgroup.create("h2iot-1-server", PROFILE, (0,), layout=_layout(v2_root))
    node = v2_root / "h2iot" / "h2iot-1-server"
    (node / "cpu.stat").write_text(
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
        "nr_periods 400\nnr_throttled 390\nthrottled_usec 7000000\n"
    )
    (node / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n")
    (node / "memory.peak").write_text("52428800\n")
    assert cgroup.cpu_seconds() == 2.5
    assert cgroup.throttling() == {"periods": 400, "throttled_periods": 390, "throttled_s": 7.0}
    assert cgroup.oom_kills() == 1
    assert cgroup.memory_peak_bytes() == 52428800
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    cgroup.add(child.pid)
    assert (node / "cgroup.procs").read_text() == str(child.pid)


def test_stale_node_cgroups_are_reaped_and_the_node_removed(v2_root: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = v2_root / "h2iot" / f"h2iot-{dead.pid}-client"
    stale.mkdir()
    ours = v2_root / "h2iot" / f"h2iot-{os.getpid()}-server"  # its controller is alive
    ours.mkdir()
    cgroup = NodeCgroup.create(
        f"h2iot-{os.getpid()}-client", PROFILE, (1,), layout=_layout(v2_root)
    )
    assert not stale.exists() and ours.is_dir()
    node = v2_root / "h2iot" / f"h2iot-{os.getpid()}-client"
    for control in node.iterdir():  # the kernel's control files do not stop an rmdir
        control.unlink()
    cgroup.remove()
    assert not node.exists()


def test_a_cgroup_that_cannot_be_made_is_cleaned_up_and_named(v2_root: Path) -> None:
    (v2_root / "h2iot" / "cpuset.mems").unlink()  # the parent has no cpuset: v2 would refuse
    with pytest.raises(EmulationError, match=r"^cgroup: cannot read .*/h2iot/cpuset\.mems: "):
        NodeCgroup.create("h2iot-1-client", PROFILE, (1,), layout=_layout(v2_root))
    assert not (v2_root / "h2iot" / "h2iot-1-client").exists()
