"""CPU use of a node: a whole process tree (children come and go per trial) or a cgroup.

A tree's CPU time is the sum over its live members of their own user + system time plus their
`children_*` time, which holds every descendant they have already reaped. So when a child exits
and its parent waits for it, its time moves from its own entry into the parent's: the sum stays
continuous. Membership is rescanned every `rescan_s` (a scan of /proc costs milliseconds); a
process found late brings all its CPU time with it, so no time is lost, only shifted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil

from controller.errors import ConfigError

_USEC_PER_S = 1e6
_NSEC_PER_S = 1e9


class ProcessTreeCpu:
    """Cumulative CPU seconds of a process and all its descendants."""

    def __init__(
        self,
        pid: int,
        rescan_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            self._root = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise ConfigError(f"--watch-pid {pid}: no such process") from None
        self.pid = pid
        self._rescan_s = rescan_s
        self._clock = clock
        self._members: dict[int, tuple[psutil.Process, int]] = {pid: (self._root, -1)}
        self._seen: dict[int, float] = {}
        self._orphaned = 0.0  # time of members that died outside the tree (reaped by init)
        self._next_scan = 0.0
        self._last_total = 0.0

    def cpu_seconds(self) -> float:
        now = self._clock()
        if now >= self._next_scan:
            self._next_scan = now + self._rescan_s
            self._rescan()
        total = self._orphaned
        for pid, (process, parent) in list(self._members.items()):
            try:
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                del self._members[pid]
                last = self._seen.pop(pid, 0.0)
                if parent not in self._members:  # no parent of ours will reap it
                    self._orphaned += last
                    total += last
                continue
            own = times.user + times.system + times.children_user + times.children_system
            self._seen[pid] = own
            total += own
        # Between a child's exit and our next reading of its parent the sum dips for a moment.
        self._last_total = max(total, self._last_total)
        return self._last_total

    def _rescan(self) -> None:
        try:
            children = self._root.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            if child.pid not in self._members:
                try:
                    self._members[child.pid] = (child, child.ppid())
                except psutil.NoSuchProcess:
                    continue


class CgroupCpu:
    """Cumulative CPU seconds of a cgroup: exact and cheap. A v1 cpuacct directory's
    `cpuacct.usage` (ns), else a v2 directory's `cpu.stat` usage_usec."""

    def __init__(self, path: Path) -> None:
        self._usage = path / "cpuacct.usage"
        self._stat = path / "cpu.stat"
        if not self._usage.is_file() and not self._stat.is_file():
            raise ConfigError(
                f"--watch cgroup:{path}: no cpu.stat or cpuacct.usage (not a cgroup directory?)"
            )

    def cpu_seconds(self) -> float:
        if self._usage.is_file():
            return int(self._usage.read_text()) / _NSEC_PER_S
        for line in self._stat.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / _USEC_PER_S
        raise ConfigError(f"{self._stat}: no usage_usec line")


class Utilisation:
    """Turns a cumulative CPU-seconds counter into utilisation per interval, in [0, 1] of
    `cores`, of which at most `busy_cores` (default: all) can be busy. CPU time beyond that in
    an interval is carried into the next, so none is lost."""

    def __init__(
        self,
        cpu_seconds: Callable[[], float],
        cores: int,
        now_s: float,
        busy_cores: int | None = None,
    ) -> None:
        self._cpu_seconds = cpu_seconds
        self._cores = cores
        self._busy_cores = min(cores, busy_cores or cores)
        self._accounted = cpu_seconds()
        self._last_s = now_s
        self._last = 0.0

    def update(self, now_s: float) -> float:
        """Utilisation since the previous update (the previous value again if no time passed)."""
        elapsed = now_s - self._last_s
        if elapsed <= 0:
            return self._last
        self._last_s = now_s
        used = min(elapsed * self._busy_cores, max(0.0, self._cpu_seconds() - self._accounted))
        self._accounted += used
        self._last = used / (elapsed * self._cores)
        return self._last
