"""The node's per-trial conditions: a fake /proc and /sys tree in a temp dir for every reading
a Pi has, and this real machine, where what is absent must be None with a reason."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from agent import kernel_counters
from agent.conditions import (
    THROTTLED_SYSFS,
    Host,
    Snapshot,
    TrialWatch,
    combine,
    parse_vcgencmd_throttled,
)

TICKS = os.sysconf("SC_CLK_TCK")


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _stat(root: Path, busy_per_cpu: int) -> None:
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
    lines += [f"cpu{n} {busy_per_cpu} 0 0 1000 7 0 0 0 0 0" for n in range(4)]
    _write(root, "proc/stat", "\n".join(lines) + "\nintr 1 2 3\n")


def _pi(root: Path, *, freq_khz: int = 1_200_000, temp_mc: int = 55_000, flags: str = "0") -> None:
    """A Pi 3B's tree: four CPUs under cpufreq, one thermal zone, the firmware's flags."""
    for n in range(4):
        _write(root, f"sys/devices/system/cpu/cpu{n}/cpufreq/scaling_cur_freq", f"{freq_khz}\n")
        _write(root, f"sys/devices/system/cpu/cpu{n}/cpufreq/scaling_governor", "ondemand\n")
    _write(root, "sys/class/thermal/thermal_zone0/temp", f"{temp_mc}\n")
    _write(root, "sys/class/thermal/thermal_zone0/type", "cpu-thermal\n")
    _write(root, THROTTLED_SYSFS, f"{flags}\n")
    _stat(root, 100)
    _write(root, "proc/softirqs", "CPU0 CPU1 CPU2 CPU3\nNET_TX: 1 2 3 4\nNET_RX: 5 6 7 8\n")
    _write(root, "proc/self/net/snmp", "Udp: InDatagrams OutDatagrams RcvbufErrors\nUdp: 1 2 0\n"
           "Tcp: InSegs OutSegs RetransSegs\nTcp: 3 4 0\n")  # fmt: skip


def test_a_pi_tree_reads_every_field(tmp_path: Path) -> None:
    _pi(tmp_path, flags="50005")
    host = Host(tmp_path, cpus=(0, 1, 2, 3))
    snap = host.snapshot()
    assert snap.cpu_freq_khz == (1_200_000,) * 4
    assert snap.governors == ("ondemand",) * 4
    assert snap.temp_mc == 55_000
    assert snap.temp_zone == "cpu-thermal"
    assert snap.throttled_flags == 0x50005
    assert snap.busy_ticks == 4 * 100
    assert snap.unavailable == {}


def test_a_trial_takes_the_lowest_clock_the_hottest_zone_and_ored_flags(tmp_path: Path) -> None:
    _pi(tmp_path, flags="0")
    _write(tmp_path, "sys/class/thermal/thermal_zone1/temp", "40000\n")
    _write(tmp_path, "sys/class/thermal/thermal_zone1/type", "gpu\n")
    watch = TrialWatch(Host(tmp_path, cpus=(0, 1, 2, 3)))
    # During the trial the firmware capped the clock on one CPU, the SoC warmed up and the soft
    # limit became active; another process kept the CPUs busy.
    _write(tmp_path, "sys/devices/system/cpu/cpu2/cpufreq/scaling_cur_freq", "600000\n")
    _write(tmp_path, "sys/class/thermal/thermal_zone0/temp", "81500\n")
    _write(tmp_path, THROTTLED_SYSFS, "80008\n")
    _stat(tmp_path, 100 + 10 * TICKS)  # 10 s of busy time per CPU: far more than this test
    conditions = watch.end()
    assert conditions.cpu_freq_mhz == 600.0
    assert conditions.governor == "ondemand"
    assert conditions.temp_c == 81.5
    assert conditions.throttled_flags == 0x80008
    assert conditions.other_cpu_pct is not None and conditions.other_cpu_pct > 100.0
    assert conditions.cpus == (0, 1, 2, 3)
    assert conditions.unavailable == {}


def test_different_governors_are_all_named(tmp_path: Path) -> None:
    _pi(tmp_path)
    _write(tmp_path, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "performance\n")
    conditions = TrialWatch(Host(tmp_path, cpus=(0, 3))).end()
    assert conditions.governor == "ondemand+performance"


def test_only_the_processes_cpus_count(tmp_path: Path) -> None:
    """A node pinned to CPU 1 is not busy because CPU 0 is (local nodes share a machine)."""
    _pi(tmp_path)
    start = Host(tmp_path, cpus=(1,)).snapshot()
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0", f"cpu0 {100 + 50 * TICKS} 0 0 1000 7 0 0 0 0 0"]
    lines += [f"cpu{n} 100 0 0 1000 7 0 0 0 0 0" for n in (1, 2, 3)]
    _write(tmp_path, "proc/stat", "\n".join(lines) + "\n")
    end = Host(tmp_path, cpus=(1,)).snapshot()
    assert end.busy_ticks == start.busy_ticks
    assert combine(start, end, (1,)).other_cpu_pct == 0.0


def test_other_load_is_busy_time_minus_own_cpu_over_elapsed() -> None:
    def snap(t_s: float, busy_ticks: int, own_s: float) -> Snapshot:
        kernel = kernel_counters.snapshot(None, None, (0, 0))
        return Snapshot(int(t_s * 1e9), None, None, None, None, None, busy_ticks, own_s, kernel)

    # 2 s; the CPUs were busy 1.5 s, of which 0.5 s were this process's: 1 s others, 50 %.
    conditions = combine(snap(10.0, 0, 1.0), snap(12.0, int(1.5 * TICKS), 1.5), (0,))
    assert conditions.other_cpu_pct == 50.0
    # This process alone (ticks lag its own accounting): never negative.
    assert combine(snap(0, 0, 0.0), snap(1, 0, 0.3), (0,)).other_cpu_pct == 0.0
    zero = combine(snap(1, 0, 0.0), snap(1, 5, 0.0), (0,))
    assert zero.other_cpu_pct is None and "no measurable time" in zero.unavailable["other_cpu_pct"]


def test_an_empty_tree_gives_none_with_reasons(tmp_path: Path) -> None:
    conditions = TrialWatch(Host(tmp_path, cpus=(0,))).end()
    assert conditions.to_dict() == {
        "cpu_freq_mhz": None,
        "governor": None,
        "temp_c": None,
        "throttled_flags": None,
        "other_cpu_pct": None,
        "cpus": [0],
        "kernel": conditions.kernel.to_dict(),
        "unavailable": conditions.unavailable,
    }
    # Only the process's context switches are known: getrusage's, not the tree's.
    known = {name for name, count in conditions.kernel.counts.items() if count is not None}
    assert known == set(kernel_counters.SWITCH_FIELDS)
    assert set(conditions.unavailable) == {
        "cpu_freq_mhz",
        "governor",
        "temp_c",
        "throttled_flags",
        "other_cpu_pct",
        *kernel_counters.SOFTIRQ_FIELDS,
        *kernel_counters.SNMP_FIELDS,
    }
    assert "cpufreq" in conditions.unavailable["cpu_freq_mhz"]
    assert "thermal" in conditions.unavailable["temp_c"]
    assert "vcgencmd" in conditions.unavailable["throttled_flags"]


def test_a_zone_without_a_reading_is_skipped(tmp_path: Path) -> None:
    _pi(tmp_path)
    _write(tmp_path, "sys/class/thermal/thermal_zone1/temp", "\n")  # sensor off: no number
    _write(tmp_path, "sys/class/thermal/thermal_zone1/type", "off\n")
    assert Host(tmp_path, cpus=(0,)).snapshot().temp_mc == 55_000


def _vcgencmd(root: Path, script: str) -> None:
    path = root / "usr/bin/vcgencmd"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_without_the_sysfs_file_vcgencmd_is_asked(tmp_path: Path) -> None:
    """An older Pi kernel: no get_throttled in sysfs, the firmware's tool answers."""
    _pi(tmp_path)
    (tmp_path / THROTTLED_SYSFS).unlink()
    _vcgencmd(tmp_path, 'test "$1" = get_throttled && echo throttled=0x20002')
    assert Host(tmp_path, cpus=(0,)).snapshot().throttled_flags == 0x20002


def test_a_failing_vcgencmd_is_a_reason(tmp_path: Path) -> None:
    """Without the video group vcgencmd cannot open /dev/vchiq: the reason is its message."""
    _pi(tmp_path)
    (tmp_path / THROTTLED_SYSFS).unlink()
    _vcgencmd(tmp_path, "echo 'VCHI initialization failed' >&2; exit 255")
    snap = Host(tmp_path, cpus=(0,)).snapshot()
    assert snap.throttled_flags is None
    assert "VCHI initialization failed" in snap.unavailable["throttled_flags"]


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("throttled=0x0\n", 0),
        ("throttled=0x50005", 0x50005),
        ("throttled=", None),
        ("error=2 error_msg=...", None),
        ("", None),
    ],
)
def test_vcgencmd_output(text: str, flags: int | None) -> None:
    assert parse_vcgencmd_throttled(text) == flags


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux /proc and /sys")
def test_this_machine() -> None:
    """Whatever this machine has is a number; whatever it lacks is None and has a reason."""
    watch = TrialWatch()
    sum(range(200_000))
    conditions = watch.end().to_dict()
    reasons = conditions["unavailable"]
    assert isinstance(reasons, dict)
    for name in ("cpu_freq_mhz", "governor", "temp_c", "throttled_flags", "other_cpu_pct"):
        assert (conditions[name] is None) == (name in reasons), name
    assert conditions["other_cpu_pct"] is not None  # every Linux has /proc/stat
    assert conditions["cpus"] == sorted(os.sched_getaffinity(0))


def test_a_counters_only_start_reads_the_rest_at_the_end(tmp_path: Path) -> None:
    """The server's way: a cheap first reading on the request path, the clock, temperature and
    flags when the trial's record is written."""
    _pi(tmp_path, temp_mc=90_000, flags="4")
    host = Host(tmp_path, cpus=(0,))
    watch = TrialWatch(host, instant_start=False)
    assert watch.start.cpu_freq_khz is None and watch.start.throttled_flags is None
    assert watch.start.busy_ticks == 100
    _write(tmp_path, "sys/class/thermal/thermal_zone0/temp", "50000\n")
    _write(tmp_path, THROTTLED_SYSFS, "0\n")
    conditions = watch.end()
    assert conditions.temp_c == 50.0  # the hot start was not read
    assert conditions.throttled_flags == 0
    assert conditions.cpu_freq_mhz == 1200.0
    assert conditions.unavailable == {}
