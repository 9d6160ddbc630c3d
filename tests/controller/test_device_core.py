"""Device emulation, the pure parts: profiles, cgroup layouts and writes, the quota fit, the
command that joins a cgroup, the config key, and the meter's scaling to the emulated device."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config import load_config
from controller.config.profile import PROFILES, DeviceProfile, pinned_cores, resolve
from controller.device.calibrate import ProbeRun, candidate_quotas, fit_quota
from controller.device.hierarchy import (
    AccountingPlace,
    Layout,
    LayoutError,
    Write,
    accounting_place,
    find_layout,
    limit_writes,
)
from controller.device.probe import fnv1a, run
from controller.device.transport import JOIN_FAILED_STATUS, joined_command
from controller.errors import ConfigError
from controller.meter.node_power import NodePower, WatchSpec
from controller.meter.power_model import PI_3B

# ---------------------------------------------------------------- layouts

# This project's CI machines: cgroup v1, cpu and cpuacct on hierarchies of their own, the
# controller's memory cgroup nested (a container's), a v2 hierarchy without controllers.
V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_SELF = """\
9:name=systemd:/
4:memory:/process_api/abc
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
"""


def test_v1_with_separate_hierarchies_makes_node_cgroups_inside_our_own() -> None:
    layout = find_layout(V1_MOUNTS, V1_SELF, "")
    assert layout.version == 1
    assert layout.parent("cpu") == "/sys/fs/cgroup/cpu"
    assert layout.parent("memory") == "/sys/fs/cgroup/memory/process_api/abc"
    assert layout.directories("n") == (
        "/sys/fs/cgroup/cpu/n",
        "/sys/fs/cgroup/cpuacct/n",
        "/sys/fs/cgroup/cpuset/n",
        "/sys/fs/cgroup/memory/process_api/abc/n",
    )


def test_v1_with_cpu_and_cpuacct_co_mounted_shares_one_directory() -> None:
    mounts = (
        "25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "26 24 0:23 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
        "27 24 0:24 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    )
    own = "4:memory:/user.slice\n3:cpuset:/\n2:cpu,cpuacct:/user.slice\n"
    layout = find_layout(mounts, own, None)
    assert layout.directory("cpu", "n") == layout.directory("cpuacct", "n")
    assert layout.directories("n") == (
        "/sys/fs/cgroup/cpu,cpuacct/user.slice/n",
        "/sys/fs/cgroup/cpuset/n",
        "/sys/fs/cgroup/memory/user.slice/n",
    )


def test_a_container_mount_rooted_at_its_own_cgroup_is_joined_without_repeating_it() -> None:
    mounts = (
        "30 29 0:26 /docker/c1 /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct,cpuset,memory\n"
    )
    layout = find_layout(mounts, "3:cpu,cpuacct,cpuset,memory:/docker/c1\n", None)
    assert set(layout.directories("n")) == {"/sys/fs/cgroup/cpu/n"}


def test_pure_v2_puts_node_cgroups_under_a_shared_parent_at_the_root() -> None:
    mounts = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    layout = find_layout(mounts, "0::/user.slice/session-1.scope\n", "cpuset cpu io memory pids\n")
    assert layout.version == 2 and layout.v2_root == "/sys/fs/cgroup"
    assert layout.directories("n") == ("/sys/fs/cgroup/h2iot/n",)


def test_an_accounting_cgroup_goes_under_our_own_cpuacct_cgroup_else_under_v2s_h2iot() -> None:
    assert accounting_place(V1_MOUNTS, V1_SELF) == AccountingPlace(1, "/sys/fs/cgroup/cpuacct")
    co_mounted = "25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    place = accounting_place(co_mounted, "2:cpu,cpuacct:/user.slice\n")
    assert place.parent == "/sys/fs/cgroup/cpu,cpuacct/user.slice"
    v2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    # No controller is needed: a v2 cgroup counts its CPU time in cpu.stat regardless.
    assert accounting_place(v2, "0::/user.slice\n") == AccountingPlace(
        2, "/sys/fs/cgroup/h2iot", v2_root="/sys/fs/cgroup"
    )
    with pytest.raises(LayoutError, match="no cgroup v1 cpuacct controller and no cgroup v2"):
        accounting_place("", "")


def test_missing_controllers_are_named() -> None:
    mounts = "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    with pytest.raises(LayoutError, match="does not offer cpuset, memory"):
        find_layout(mounts, "0::/\n", "cpu io pids")
    without_memory = "\n".join(line for line in V1_MOUNTS.splitlines() if "memory" not in line)
    with pytest.raises(LayoutError, match="cgroup v1 has no memory controller"):
        find_layout(without_memory, V1_SELF, None)
    with pytest.raises(LayoutError, match="no cgroup hierarchy"):
        find_layout("", "", None)


V1 = Layout(1, tuple((c, f"/cg/{c}") for c in ("cpu", "cpuacct", "cpuset", "memory")))
V2 = Layout(2, tuple((c, "/cg/h2iot") for c in ("cpu", "cpuacct", "cpuset", "memory")), "/cg")


def test_v1_writes_pin_then_quota_then_memory_and_its_swap() -> None:
    profile = DeviceProfile(cpu_quota=0.08, cpu_period_us=20_000, memory_mib=64)
    assert limit_writes(V1, profile, (1,), "0") == [
        Write("cpuset", "cpuset.cpus", "1"),
        Write("cpuset", "cpuset.mems", "0"),
        Write("cpu", "cpu.cfs_period_us", "20000"),
        Write("cpu", "cpu.cfs_quota_us", "1600"),
        Write("cpu", "cpu.shares", "10240"),
        Write("memory", "memory.limit_in_bytes", str(64 << 20)),
        Write("memory", "memory.memsw.limit_in_bytes", str(64 << 20), optional=True),
    ]


def test_v2_writes_cpu_max_and_memory_max_and_no_swap() -> None:
    profile = DeviceProfile(cpu_quota=0.5, cores=2, cpu_period_us=100_000, memory_mib=1)
    assert limit_writes(V2, profile, (0, 1), "") == [
        Write("cpuset", "cpuset.cpus", "0,1"),
        Write("cpu", "cpu.max", "100000 100000"),
        Write("cpu", "cpu.weight", "1000"),
        Write("memory", "memory.max", str(1 << 20)),
        Write("memory", "memory.swap.max", "0", optional=True),
    ]


def test_an_unlimited_profile_writes_no_quota_and_no_memory_limit() -> None:
    assert [w.value for w in limit_writes(V2, DeviceProfile(), (0,), "")] == [
        "0",
        "max 20000",
        "1000",
    ]
    assert Write("cpu", "cpu.cfs_quota_us", "-1") in limit_writes(V1, DeviceProfile(), (0,), "0")


# ---------------------------------------------------------------- profiles


def test_named_profiles_calibrate_their_quota_from_their_speed() -> None:
    rpi = resolve({"profile": "rpi3b"})
    assert rpi == PROFILES["rpi3b"]
    assert (rpi.speed_fraction, rpi.cpu_quota, rpi.cores, rpi.memory_mib) == (0.08, None, 1, 1024)
    assert rpi.quota_us is None
    fixed = resolve({"profile": "rpi3b", "cpu_quota": 0.1, "memory_mib": None})
    assert (fixed.quota_us, fixed.memory_bytes, fixed.profile) == (2000, None, "rpi3b")


def test_a_quota_below_the_kernels_smallest_names_the_period_that_fits() -> None:
    with pytest.raises(ValueError) as caught:
        resolve({"profile": "class2", "cpu_period_us": 20_000})
    assert str(caught.value) == (
        "speed_fraction 0.01 of a 20000 us period is 200 us per period, below the kernel's "
        "smallest quota (1000 us); raise cpu_period_us to at least 100000"
    )
    with pytest.raises(ValueError, match=r"cpu_quota 0\.02 of a 20000 us period is 400 us"):
        resolve({"cpu_quota": 0.02})


@given(st.integers(1, 8), st.data())
def test_pinned_cores_start_at_the_nodes_core_and_wrap(cores: int, data: st.DataObject) -> None:
    available = tuple(data.draw(st.sets(st.integers(0, 63), min_size=cores, max_size=16)))
    available = tuple(sorted(available))
    first = data.draw(st.sampled_from(available))
    pinned = pinned_cores(first, cores, available)
    assert pinned[0] == first and len(set(pinned)) == cores and set(pinned) <= set(available)


def test_pinning_problems_are_named() -> None:
    assert pinned_cores(None, 2, (2, 3)) == (2, 3)
    assert pinned_cores(1, 2, (0, 1)) == (1, 0)
    with pytest.raises(ValueError, match="3 cores asked, this machine has 2"):
        pinned_cores(0, 3, (0, 1))
    with pytest.raises(ValueError, match=r"core 5 is not one of this machine's \(0,1\)"):
        pinned_cores(5, 1, (0, 1))


# ---------------------------------------------------------------- config key


def test_device_key_takes_a_name_or_a_table_merged_over_the_named_profile() -> None:
    config = load_config(None, ["nodes.client.device=rpi3b", "nodes.client.device.cpu_quota=0.09"])
    assert config.client.device == DeviceProfile("rpi3b", 0.08, 0.09, 20_000, 1, 1024, 730.0)
    assert config.server.device is None
    assert config.to_dict()["nodes"]["client"]["device"] == {
        "profile": "rpi3b",
        "speed_fraction": 0.08,
        "cpu_quota": 0.09,
        "cpu_period_us": 20_000,
        "cores": 1,
        "memory_mib": 1024,
        "peak_current_ma": 730.0,
    }
    memory_only = load_config(None, ["nodes.server.device={memory_mib = 16}"])
    assert memory_only.server.device == DeviceProfile(memory_mib=16)
    assert load_config(None, ["nodes.client.device=none"]).client.device is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "nodes.client.device=rpi4",
            'nodes.client.device: expected one of "custom", "rpi3b", "class2", got a string '
            '("rpi4")',
        ),
        (
            "nodes.client.device=3",
            'nodes.client.device: expected a profile name ("rpi3b", "class2") or a table, got '
            "an integer (3)",
        ),
        (
            "nodes.server.device={cpu_qota = 0.1}",
            "nodes.server.device.cpu_qota: unknown key (known: profile, speed_fraction, "
            "cpu_quota, cpu_period_us, cores, memory_mib, peak_current_ma; did you mean "
            "cpu_quota?)",
        ),
        ("nodes.server.device.cores=0", "nodes.server.device.cores: 0 is outside 1..4096"),
        (
            "nodes.client.device.cpu_quota=1.5",
            "nodes.client.device.cpu_quota: 1.5 is outside (0, 1]",
        ),
        (
            "nodes.client.device={cpu_quota = 0.01}",
            "nodes.client.device: cpu_quota 0.01 of a 20000 us period is 200 us per period, "
            "below the kernel's smallest quota (1000 us); raise cpu_period_us to at least 100000",
        ),
    ],
)
def test_device_key_errors_are_one_line_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, [override])
    assert str(caught.value) == f"--set: {message}"


def test_a_device_on_an_ssh_node_needs_remote_device(tmp_path: Path) -> None:
    path = tmp_path / "ssh.toml"
    path.write_text('[nodes.server]\nhost = "pi.local"\nknown_hosts = "kh"\ndevice = "rpi3b"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: nodes.server.device: an SSH node's own hardware is its device: to emulate "
        "this profile on that host as well (a cgroup there, which needs root on it), set "
        'nodes.server.remote_device = true; or unset it, or make nodes.server.host "local"'
    )
    config = load_config(path, ["nodes.server.remote_device=true"])
    assert config.server.remote_device and config.server.device == PROFILES["rpi3b"]


def test_remote_device_is_for_ssh_nodes_only_and_a_boolean() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, ["nodes.client.remote_device=true"])
    assert str(caught.value) == (
        "--set: nodes.client.remote_device: only for SSH nodes (a local node's device is always "
        "emulated); unset it"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(None, ["nodes.client.remote_device=1"])
    assert (
        str(caught.value)
        == "--set: nodes.client.remote_device: expected true or false, got an integer (1)"
    )


# ---------------------------------------------------------------- calibration


def _run(quota: float, units_per_s: float) -> ProbeRun:
    return ProbeRun(quota, round(units_per_s * 1000), 1000.0, quota * 1000)


@given(st.floats(0.3, 1.0), st.floats(100, 10_000), st.floats(0.01, 0.5))
def test_a_proportional_throttle_is_fitted_exactly(
    efficiency: float, host: float, fraction: float
) -> None:
    runs = [_run(q, efficiency * q * host) for q in (fraction * 0.75, fraction, fraction * 1.5)]
    quota = fit_quota(fraction * host, runs)
    assert quota == pytest.approx(fraction / efficiency, rel=0.01)


def test_a_fit_needs_a_throttled_run_that_worked() -> None:
    with pytest.raises(ValueError, match="no throttled probe run did any work"):
        fit_quota(100.0, [ProbeRun(None, 10, 1.0, 1.0), ProbeRun(0.1, 0, 1.0, 0.1)])


def test_candidates_bracket_the_fraction_above_the_kernels_floor() -> None:
    assert candidate_quotas(PROFILES["rpi3b"], 0.08) == pytest.approx([0.06, 0.08, 0.12])
    assert candidate_quotas(PROFILES["class2"], 0.01) == pytest.approx([0.01, 0.015])


def test_the_probe_does_http2_and_hash_work() -> None:
    assert fnv1a(b"") == 0x811C9DC5 and fnv1a(b"a") == 0xE40C292C  # the published FNV-1a vectors
    found = run(0.05)
    assert found["units"] >= 1 and found["wall_s"] >= 0.05 and found["cpu_s"] > 0


# ---------------------------------------------------------------- joining a cgroup


def test_a_joined_command_writes_its_shells_pid_then_becomes_the_command(tmp_path: Path) -> None:
    procs = [tmp_path / "a.procs", tmp_path / "b.procs"]
    command = joined_command("echo $$; echo out; exit 3", [str(p) for p in procs])
    result = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)
    assert result.returncode == 3
    pid, out = result.stdout.split()
    assert out == "out" and all(p.read_text().strip() == pid for p in procs)


def test_a_command_that_cannot_join_does_not_run(tmp_path: Path) -> None:
    command = joined_command(f"touch {tmp_path}/ran", [str(tmp_path / "missing" / "procs")])
    result = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)
    assert result.returncode == JOIN_FAILED_STATUS
    assert result.stderr.strip() == "h2iot: cannot join the node cgroup"
    assert not (tmp_path / "ran").exists()


# ---------------------------------------------------------------- the meter's view


def test_a_throttled_node_busy_on_its_quota_reads_as_a_busy_pi_core(tmp_path: Path) -> None:
    usage = tmp_path / "cpuacct.usage"
    usage.write_text("0")
    watch = (WatchSpec("cgroup", str(tmp_path), core_fraction=0.08),)
    power = NodePower(watch, PI_3B, now_s=0.0)
    usage.write_text(str(int(0.08 * 1e9)))  # the whole quota of one second
    power.refresh(1.0)
    one_core_busy = PI_3B.power_mw(1 / PI_3B.cores)
    assert power.power_mw((0,))[0] == pytest.approx(one_core_busy)
    usage.write_text(str(int(0.10 * 1e9)))  # half the quota in the next half second
    power.refresh(1.5)
    assert power.power_mw((0,))[0] == pytest.approx(PI_3B.power_mw(0.5 / PI_3B.cores))


def test_an_emulated_one_core_device_bursting_past_its_core_reads_as_one_busy_core(
    tmp_path: Path,
) -> None:
    usage = tmp_path / "cpuacct.usage"
    usage.write_text("0")
    watch = (WatchSpec("cgroup", str(tmp_path), core_fraction=0.1, cores=1),)
    power = NodePower(watch, PI_3B, now_s=0.0)
    # A period's quota spent at the host's full speed in 10 ms: 2 Pi cores' worth of work.
    usage.write_text(str(int(0.002 * 1e9)))
    power.refresh(0.01)
    one_core_busy = PI_3B.power_mw(1 / PI_3B.cores)
    assert power.power_mw((0,))[0] == pytest.approx(one_core_busy)
    power.refresh(0.02)  # the other half follows, at the same one core's rate: none is lost
    assert power.power_mw((0,))[0] == pytest.approx(one_core_busy)
    power.refresh(0.03)
    assert power.power_mw((0,))[0] == pytest.approx(PI_3B.idle_mw)


def test_what_an_ssh_node_runs_of_the_controller_needs_no_numpy() -> None:
    """A node gets the agent's dependencies only: the device set-up it runs
    (`controller.device.node_side`) must not pull in the meter's numpy through the config."""
    check = "import sys, controller.device.node_side; assert 'numpy' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", check], check=False).returncode == 0
