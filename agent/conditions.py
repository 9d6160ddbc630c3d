"""The node's conditions while a trial runs: CPU frequency and governor, temperature, the
Raspberry Pi firmware's throttling flags, and the CPU other processes took.

A fast laptop and a Pi differ in these, and so does one Pi on a hot afternoon from itself in the
morning: a trial that ran throttled, hot, at another clock or beside a busy process measured
something else. The agent reads them from /proc and /sys only (stdlib, no psutil), twice per
trial (before its marker rises and after it falls, outside the measured window), and puts them
in the trial's record. What a machine does not have is None, and `unavailable` says why.

Every path is under a `root` (default "/"), so a test can build a fake sysfs tree.

- CPU frequency: `scaling_cur_freq` of the CPUs this process may run on (its affinity), the
  lowest of the two readings; the governor is theirs ("+" joins different ones).
- Temperature: the hottest thermal zone at either reading.
- Throttling: the firmware's flags (`vcgencmd get_throttled`), from the Pi kernel's sysfs file
  where it exists, else from `vcgencmd` itself, ORed over both readings. Bits 0-3 are "now"
  (under-voltage, frequency capped, throttled, soft temperature limit), 16-19 "since boot".
- Other processes: busy time of those CPUs (/proc/stat) over the trial minus this process's own
  CPU time and its children's, in percent of one core. /proc/stat counts in ticks of 10 ms, so
  a 1 s trial's figure is good to about 1 % per CPU.
- The kernel's work over the trial (agent.kernel_counters): softirqs on those CPUs, the trial
  process's context switches, the node's UDP and TCP counters; read with the CPU counters.

The client reads all of it before its marker rises and after it falls. The server reads only the
CPU counters when a trial's first request arrives (that reading is on the request path) and the
rest when the trial's record is written. A `Host` keeps the files it reads open (agent.proc_files)
and parses only the rows a record holds: a server's two readings of a trial took about 270 us of
its CPU before, 160 us since (timeit on a 2-core x86-64, best of 7).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent import kernel_counters
from agent.kernel_counters import KernelSnapshot, KernelWork
from agent.proc_files import ProcFiles

THROTTLED_SYSFS = "sys/devices/platform/soc/soc:firmware/get_throttled"
THROTTLED_NOW_MASK = 0xF
"""Bits 0-3 of the throttling flags: under-voltage, frequency capped, throttled, soft limit."""
_VCGENCMD_TIMEOUT_S = 2.0
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# /proc/stat per-CPU columns: user nice system idle iowait irq softirq steal guest guest_nice;
# guest time is already inside user and nice, idle and iowait are not busy.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class Snapshot:
    """One reading of the node; None where unavailable, with the reason in `unavailable`."""

    t_mono_ns: int
    cpu_freq_khz: tuple[int, ...] | None
    governors: tuple[str, ...] | None
    temp_mc: int | None  # millidegrees Celsius, the hottest zone
    temp_zone: str | None
    throttled_flags: int | None
    busy_ticks: int | None  # of the CPUs in `cpus`
    own_cpu_s: float  # this process and its waited-for children
    kernel: KernelSnapshot
    unavailable: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialConditions:
    """A trial's conditions from the snapshots before and after it."""

    cpu_freq_mhz: float | None  # the lowest current frequency of the node's CPUs
    governor: str | None
    temp_c: float | None  # the hottest reading
    throttled_flags: int | None  # ORed over both readings
    other_cpu_pct: float | None  # other processes' CPU, percent of one core
    cpus: tuple[int, ...]
    kernel: KernelWork
    unavailable: Mapping[str, str]

    def to_dict(self) -> dict[str, object]:
        return {
            "cpu_freq_mhz": self.cpu_freq_mhz,
            "governor": self.governor,
            "temp_c": self.temp_c,
            "throttled_flags": self.throttled_flags,
            "other_cpu_pct": self.other_cpu_pct,
            "cpus": list(self.cpus),
            "kernel": self.kernel.to_dict(),
            "unavailable": dict(self.unavailable),
        }


class Host:
    """Where /proc and /sys are (`root`), which CPUs count (default: this process's), and what
    counts as the trial's own CPU time and context switches (default: this process's and its
    waited-for children's; a server whose work runs in a child it does not wait for, nghttpd,
    adds the child's or reads them)."""

    def __init__(
        self,
        root: Path = Path("/"),
        cpus: tuple[int, ...] | None = None,
        own_cpu: Callable[[], float] | None = None,
        own_switches: Callable[[], tuple[int, int] | None] = kernel_counters.own_switches,
    ) -> None:
        self.root = root
        self.cpus = cpus if cpus is not None else tuple(sorted(os.sched_getaffinity(0)))
        self._own_cpu_s = own_cpu or own_cpu_s
        self._own_switches = own_switches
        # Decided once: a node has the sysfs file, or vcgencmd, or neither.
        self._throttled_file = root / THROTTLED_SYSFS
        self._vcgencmd = None if self._throttled_file.exists() else _find_vcgencmd(root)
        # Thermal zones do not come and go while a node runs.
        self._zones = sorted((root / "sys/class/thermal").glob("thermal_zone*"))
        # Read at every trial, twice: kept open (agent.proc_files).
        self._files = ProcFiles()

    def snapshot(self, instant: bool = True) -> Snapshot:
        """A reading; without `instant`, the CPU counters only (cheap: the server takes its
        trial's first one on the request path, and the clock, temperature and flags at the
        trial's end)."""
        missing: dict[str, str] = {}
        # The CPU counters first, so the rest of the reading is not in the trial's span.
        busy = self._busy_ticks(missing)
        own = self._own_cpu_s()
        kernel = kernel_counters.read_snapshot(
            self.cpus, self._own_switches, self.root, self._files
        )
        now = time.monotonic_ns()
        if not instant:
            return Snapshot(now, None, None, None, None, None, busy, own, kernel, missing)
        freq = self._per_cpu("scaling_cur_freq", "cpu_freq_mhz", missing)
        governors = self._per_cpu("scaling_governor", "governor", missing)
        temp, zone = self._temperature(missing)
        return Snapshot(
            t_mono_ns=now,
            cpu_freq_khz=None if freq is None else tuple(int(v) for v in freq),
            governors=governors,
            temp_mc=temp,
            temp_zone=zone,
            throttled_flags=self._throttled(missing),
            busy_ticks=busy,
            own_cpu_s=own,
            kernel=kernel,
            unavailable=missing,
        )

    def _read(self, relative: str) -> str:
        return self._files.read_text(self.root / relative).strip()

    def _per_cpu(self, name: str, key: str, missing: dict[str, str]) -> tuple[str, ...] | None:
        values = []
        for cpu in self.cpus:
            path = f"sys/devices/system/cpu/cpu{cpu}/cpufreq/{name}"
            try:
                values.append(self._read(path))
            except OSError as exc:
                missing[key] = f"/{path}: {exc.strerror or exc} (no cpufreq driver?)"
                return None
        return tuple(values)

    def _temperature(self, missing: dict[str, str]) -> tuple[int | None, str | None]:
        readings: list[tuple[int, str]] = []
        for zone in self._zones:
            try:
                milli = int(self._files.read_text(zone / "temp").strip())
                kind = self._files.read_text(zone / "type").strip()
            except (OSError, ValueError):
                continue  # a zone whose sensor is off (ENODATA) says nothing
            readings.append((milli, kind))
        if not readings:
            missing["temp_c"] = "no readable thermal zone under /sys/class/thermal"
            return None, None
        return max(readings)

    def _throttled(self, missing: dict[str, str]) -> int | None:
        if self._vcgencmd is None:
            try:
                return int(self._read(THROTTLED_SYSFS), 16)
            except (OSError, ValueError):
                missing["throttled_flags"] = (
                    "no Raspberry Pi firmware here (neither /" + THROTTLED_SYSFS + " nor vcgencmd)"
                )
                return None
        try:
            done = subprocess.run(
                [self._vcgencmd, "get_throttled"],
                capture_output=True,
                text=True,
                timeout=_VCGENCMD_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            missing["throttled_flags"] = f"vcgencmd get_throttled: {exc}"
            return None
        flags = parse_vcgencmd_throttled(done.stdout)
        if done.returncode != 0 or flags is None:
            why = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
            missing["throttled_flags"] = f"vcgencmd get_throttled: {why}"
        return flags

    def _busy_ticks(self, missing: dict[str, str]) -> int | None:
        wanted = {f"cpu{n}" for n in self.cpus}
        try:
            lines = self._read("proc/stat").splitlines()
        except OSError as exc:
            missing["other_cpu_pct"] = f"/proc/stat: {exc.strerror or exc}"
            return None
        total = 0
        seen = 0
        for line in lines:
            name, _, rest = line.partition(" ")
            if name in wanted:
                columns = rest.split()
                total += sum(int(columns[i]) for i in _BUSY_COLUMNS if i < len(columns))
                seen += 1
                if seen == len(wanted):
                    break  # the interrupt counts that follow are most of the file
        if seen != len(wanted):
            missing["other_cpu_pct"] = "/proc/stat: not every CPU of this process is listed"
            return None
        return total


def parse_vcgencmd_throttled(text: str) -> int | None:
    """`throttled=0x50005` -> 0x50005; anything else None."""
    name, _, value = text.strip().partition("=")
    if name != "throttled":
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def _find_vcgencmd(root: Path) -> str | None:
    """vcgencmd on PATH, or where Raspberry Pi OS has put it (/usr/bin, formerly /opt/vc/bin)."""
    if root != Path("/"):
        found = [root / d / "vcgencmd" for d in ("usr/bin", "opt/vc/bin")]
        return next((str(p) for p in found if os.access(p, os.X_OK)), None)
    return shutil.which("vcgencmd") or shutil.which("vcgencmd", path="/usr/bin:/opt/vc/bin")


def own_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def combine(start: Snapshot, end: Snapshot, cpus: tuple[int, ...]) -> TrialConditions:
    """The trial's conditions from its two snapshots (pure)."""
    kernel = kernel_counters.difference(start.kernel, end.kernel)
    unavailable = {**start.unavailable, **end.unavailable, **kernel.unavailable}
    freqs = [f for s in (start, end) if s.cpu_freq_khz for f in s.cpu_freq_khz]
    governors = sorted({g for s in (start, end) if s.governors for g in s.governors})
    temps = [s.temp_mc for s in (start, end) if s.temp_mc is not None]
    flags = [s.throttled_flags for s in (start, end) if s.throttled_flags is not None]
    other: float | None = None
    elapsed_s = (end.t_mono_ns - start.t_mono_ns) / 1e9
    if start.busy_ticks is not None and end.busy_ticks is not None:
        if elapsed_s > 0:
            busy_s = (end.busy_ticks - start.busy_ticks) / _TICKS_PER_S
            own_s = end.own_cpu_s - start.own_cpu_s
            other = round(max(0.0, busy_s - own_s) / elapsed_s * 100.0, 1)
        else:
            unavailable["other_cpu_pct"] = "the trial took no measurable time"
    flags_or = 0
    for value in flags:
        flags_or |= value
    return TrialConditions(
        cpu_freq_mhz=min(freqs) / 1000.0 if freqs else None,
        governor="+".join(governors) if governors else None,
        temp_c=max(temps) / 1000.0 if temps else None,
        throttled_flags=flags_or if flags else None,
        other_cpu_pct=other,
        cpus=cpus,
        kernel=kernel,
        unavailable=unavailable,
    )


@dataclass(frozen=True)
class BusyProcess:
    pid: int
    name: str
    cpu_pct: float  # percent of one core over the sampling interval


def busy_processes(
    interval_s: float, root: Path = Path("/"), exclude: frozenset[int] = frozenset()
) -> list[BusyProcess]:
    """Every process that used CPU over `interval_s`, busiest first (from /proc/PID/stat)."""
    first = _process_ticks(root)
    started = time.monotonic()
    time.sleep(interval_s)
    second = _process_ticks(root)
    elapsed = time.monotonic() - started
    busy = [
        BusyProcess(pid, name, round(100.0 * (ticks - first[pid][1]) / _TICKS_PER_S / elapsed, 1))
        for pid, (name, ticks) in second.items()
        if pid in first and pid not in exclude and ticks > first[pid][1]
    ]
    return sorted(busy, key=lambda p: -p.cpu_pct)


def _process_ticks(root: Path) -> dict[int, tuple[str, int]]:
    ticks: dict[int, tuple[str, int]] = {}
    for entry in (root / "proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # it exited meanwhile
        # The name is in parentheses and may hold spaces and parentheses itself.
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        ticks[int(entry.name)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime
    return ticks


def memory_bytes(root: Path = Path("/")) -> dict[str, int]:
    """MemTotal, MemAvailable, SwapTotal, SwapFree from /proc/meminfo, in bytes."""
    wanted = {"MemTotal", "MemAvailable", "SwapTotal", "SwapFree"}
    found: dict[str, int] = {}
    for line in (root / "proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in wanted:
            found[name] = int(rest.split()[0]) * 1024
    return found


# The memory controller's files where systemd and Docker mount it: cgroup v2's unified hierarchy
# ("0::PATH" in /proc/self/cgroup), or v1's memory hierarchy ("N:...memory...:PATH"): the
# mount, the limit, the usage and memory.stat's count of inactive file pages.
_CGROUP_MEMORY = {
    2: ("sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
    1: (
        "sys/fs/cgroup/memory",
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "total_inactive_file",
    ),
}
# cgroup v1 says "no limit" with the largest page count times the page size (2^63 less a page).
_NO_CGROUP_LIMIT_BYTES = 2**62


def cgroup_memory_room_bytes(root: Path = Path("/")) -> int | None:
    """What this process's memory cgroups still let it use: the least, over its cgroup and each
    ancestor that has a memory limit, of the limit less the usage, the usage without inactive
    file pages (the page cache the kernel reclaims first; a cgroup's usage counts it and soon
    fills its limit with it). None where no limit applies or none can be read. A node emulated
    under a memory limit sees the host's /proc/meminfo, not its limit."""
    try:
        memberships = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            version = 2
        elif "memory" in controllers.split(","):
            version = 1
        else:
            continue
        mount, *names = _CGROUP_MEMORY[version]
        base = root / mount
        directory = base / path.strip("/")
        while directory == base or base in directory.parents:
            room = _cgroup_room_bytes(directory, *names)
            if room is not None:
                rooms.append(room)
            directory = directory.parent
    return min(rooms, default=None)


def _cgroup_room_bytes(
    directory: Path, limit_name: str, usage_name: str, inactive_file_name: str
) -> int | None:
    try:
        limit = (directory / limit_name).read_text().strip()
        if limit == "max" or int(limit) >= _NO_CGROUP_LIMIT_BYTES:
            return None
        usage_bytes = int((directory / usage_name).read_text())
    except (OSError, ValueError):
        return None
    return max(0, int(limit) - usage_bytes + _stat_bytes(directory, inactive_file_name))


def _stat_bytes(directory: Path, name: str) -> int:
    """`name`'s value in the cgroup's memory.stat; 0 where it cannot be read."""
    try:
        for line in (directory / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class TrialWatch:
    """Made before the trial, `end()` after it: its conditions. Never raises: what cannot be
    read is None with a reason. `instant_start=False`: the clock, temperature and flags are
    read at the end only."""

    def __init__(self, host: Host | None = None, *, instant_start: bool = True) -> None:
        self.host = host or Host()
        self.start = self.host.snapshot(instant_start)

    def end(self) -> TrialConditions:
        return combine(self.start, self.host.snapshot(), self.host.cpus)
