"""A node's cgroup on this machine: made from a profile, joined by every command the node runs
(`controller.device.transport`), read for CPU time and OOM kills, removed at the end.

Names are `h2iot-<controller pid>-<role>`; cgroups left by a controller that died are removed
(with what still runs in them) the next time one is made.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from controller.config.profile import DeviceProfile
from controller.device.errors import EmulationError
from controller.device.hierarchy import V2_PARENT, Layout, LayoutError, find_layout, limit_writes

_NAME = re.compile(r"h2iot-(\d+)-[a-z]+")
_V2_CONTROLLERS = "+cpu +cpuset +memory"
_REMOVE_TIMEOUT_S = 5.0
_POLL_S = 0.02


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise EmulationError(f"cgroup: cannot read {path}: {exc.strerror or exc}") from None


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise EmulationError(
            f"cgroup: cannot write {value!r} to {path}: {exc.strerror or exc}"
        ) from None


def _unified_point(mountinfo: str) -> str | None:
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" in fields and fields[fields.index("-") + 1 :][:1] == ["cgroup2"]:
            return fields[4]
    return None


def system_layout() -> Layout:
    """This process's cgroup layout (see `controller.device.hierarchy`)."""
    mountinfo = _read(Path("/proc/self/mountinfo"))
    point = _unified_point(mountinfo)
    controllers = None
    if point is not None:
        with contextlib.suppress(OSError):
            controllers = Path(point, "cgroup.controllers").read_text()
    try:
        return find_layout(mountinfo, _read(Path("/proc/self/cgroup")), controllers)
    except LayoutError as exc:
        raise EmulationError(f"cgroup: {exc}") from None


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _procs(directory: Path) -> list[int]:
    try:
        return [int(word) for word in (directory / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_directory(directory: Path, timeout_s: float) -> str | None:
    """Kill what still runs in it (a node's leftovers), then rmdir; a problem as one line."""
    deadline = time.monotonic() + timeout_s
    while directory.exists():
        for pid in _procs(directory):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            directory.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            # EBUSY while killed processes are still being torn down.
            if time.monotonic() > deadline:
                return f"{directory}: {exc.strerror or exc}"
        time.sleep(_POLL_S)
    return None


class NodeCgroup:
    """One node's cgroup: a directory per controller (v1) or one directory (v2)."""

    def __init__(self, layout: Layout, name: str, profile: DeviceProfile) -> None:
        self.layout = layout
        self.name = name
        self.profile = profile
        self._made: list[Path] = []

    @classmethod
    def create(
        cls, name: str, profile: DeviceProfile, cpus: tuple[int, ...], layout: Layout | None = None
    ) -> NodeCgroup:
        """Make the cgroup and apply the profile's limits; `cpus` are the cores to pin to."""
        layout = layout or system_layout()
        cgroup = cls(layout, name, profile)
        try:
            cgroup._make(cpus)
        except BaseException:
            cgroup.remove()
            raise
        return cgroup

    @classmethod
    def existing(
        cls, name: str, profile: DeviceProfile, layout: Layout | None = None
    ) -> NodeCgroup:
        """A cgroup made earlier (by another process) under `name`, as far as it still exists."""
        cgroup = cls(layout or system_layout(), name, profile)
        cgroup._made = [Path(d) for d in cgroup.layout.directories(name) if Path(d).is_dir()]
        return cgroup

    def _make(self, cpus: tuple[int, ...]) -> None:
        layout = self.layout
        if layout.version == 2:
            assert layout.v2_root is not None
            parent = Path(layout.v2_root, V2_PARENT)
            _write(Path(layout.v2_root, "cgroup.subtree_control"), _V2_CONTROLLERS)
            parent.mkdir(exist_ok=True)
            _write(parent / "cgroup.subtree_control", _V2_CONTROLLERS)
        for parent in dict.fromkeys(Path(p) for _, p in layout.parents):
            reap_stale(parent)
        for directory in map(Path, layout.directories(self.name)):
            try:
                directory.mkdir()
            except OSError as exc:
                raise EmulationError(f"cgroup: cannot make {directory}: {exc.strerror}") from None
            self._made.append(directory)
        mems = _read(Path(layout.parent("cpuset"), "cpuset.mems")).strip()
        if layout.version == 1 and not mems:
            mems = _read(Path(layout.parent("cpuset"), "cpuset.effective_mems")).strip()
        for write in limit_writes(layout, self.profile, cpus, mems):
            path = Path(layout.directory(write.controller, self.name), write.file)
            if write.optional and not path.exists():
                continue
            _write(path, write.value)

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """Each directory's `cgroup.procs`: writing a pid there moves that process in."""
        return tuple(directory / "cgroup.procs" for directory in self._made)

    def add(self, pid: int) -> None:
        """Move a process into the cgroup; the children it starts from now on are in it too."""
        for directory in self._made:
            _write(directory / "cgroup.procs", str(pid))

    @property
    def usage_directory(self) -> Path:
        """The directory holding the CPU usage counter (`cpuacct.usage` or `cpu.stat`)."""
        return Path(self.layout.directory("cpuacct", self.name))

    def cpu_seconds(self) -> float:
        """CPU time used by everything that ran in the cgroup."""
        return _cpu_seconds(self.usage_directory)

    @property
    def oom_kills_file(self) -> Path:
        """The counters file holding `oom_kill` (`memory.oom_control` or `memory.events`)."""
        directory = Path(self.layout.directory("memory", self.name))
        return directory / ("memory.oom_control" if self.layout.version == 1 else "memory.events")

    def oom_kills(self) -> int:
        """Processes the kernel killed for exceeding the memory limit, so far."""
        return oom_kill_count(_read(self.oom_kills_file))

    def memory_peak_bytes(self) -> int | None:
        directory = Path(self.layout.directory("memory", self.name))
        name = "memory.max_usage_in_bytes" if self.layout.version == 1 else "memory.peak"
        try:
            return int((directory / name).read_text())
        except (OSError, ValueError):
            return None

    def throttling(self) -> dict[str, float]:
        """CFS periods elapsed and throttled, and the time spent throttled."""
        found = _stat(_read(Path(self.layout.directory("cpu", self.name), "cpu.stat")))
        throttled_s = (
            found.get("throttled_time", 0) / 1e9
            if self.layout.version == 1
            else found.get("throttled_usec", 0) / 1e6
        )
        return {
            "periods": found.get("nr_periods", 0),
            "throttled_periods": found.get("nr_throttled", 0),
            "throttled_s": throttled_s,
        }

    def remove(self) -> None:
        """Kill what is left inside and remove the directories; EmulationError if one stays."""
        problems = [
            problem
            for directory in reversed(self._made)
            if (problem := remove_directory(directory, _REMOVE_TIMEOUT_S)) is not None
        ]
        self._made = []
        if problems:
            raise EmulationError(f"cgroup: cannot remove {'; '.join(problems)}")


def _cpu_seconds(directory: Path) -> float:
    """A cgroup's CPU time: v1 `cpuacct.usage` (ns), else v2 `cpu.stat` usage_usec."""
    usage = directory / "cpuacct.usage"
    if usage.exists():
        return int(_read(usage)) / 1e9
    return _stat(_read(directory / "cpu.stat"))["usage_usec"] / 1e6


def oom_kill_count(text: str) -> int:
    """The `oom_kill` counter of a memory.oom_control (v1) or memory.events (v2) text."""
    return _stat(text).get("oom_kill", 0)


def _stat(text: str) -> dict[str, int]:
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[key] = int(value)
    return found


def reap_stale(parent: Path) -> None:
    """Remove node cgroups under `parent` whose controller process is gone."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if match and entry.is_dir() and not _alive(int(match[1])):
            remove_directory(entry, _REMOVE_TIMEOUT_S)
