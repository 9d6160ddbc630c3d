"""CPU use of a node: a cgroup (exact, what the sweep gives every local node it can) or a whole
process tree (children come and go per trial), booked at the time it was spent.

Cgroup: the kernel's per-cgroup usage counter, in ns (v1 `cpuacct.usage`) or us (v2
`cpu.stat`). Every process of the node is in it from its first instruction, so nothing is found
late and nothing is missed.

Process tree (no cgroup: not root, or no cgroup hierarchy): a snapshot of the tree is taken at
every reading (`ProcessTreeCpu`), found by walking `/proc/<pid>/task/<tid>/children` from the
root, which costs tens of microseconds, not the milliseconds of a scan of all of /proc. Each
member's CPU time is its own (its thread group's CPU clock, ns; else /proc's 10 ms ticks) plus
its reaped children's. The sum over the members is continuous as children exit into their
parent's `children_*` time. The booking rules are a pure ledger (`TreeLedger`):

- a member seen before books what it used since the previous snapshot;
- a member seen for the first time brings all the CPU time of its life so far. It is spread
  over that life, from the process's start time: the share that falls after the previous
  snapshot is booked now, the share before it belongs to samples already taken and is counted
  as `late_s`, never booked into the future. With a snapshot at every reading (every meter tick
  and marker edge) a new process is found within one tick of its start, so `late_s` stays near
  zero; the old design (a rescan every 0.25 s booking a late-found interpreter's whole start-up
  at once) moved up to a second of CPU into the trial that followed;
- a member that exits: its parent in the tree reaps it (its time moves into the parent's
  `children_*`, the sum is continuous), or init does (its last reading is kept).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from controller.errors import ConfigError

_USEC_PER_S = 1e6
_NSEC_PER_S = 1e9
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# /proc/<pid>/stat fields after the parenthesised command name (index 0 is field 3, the state).
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME, _STARTTIME = 1, 11, 12, 13, 14, 19


@dataclass(frozen=True, slots=True)
class TreeMember:
    """One process of the tree in a snapshot."""

    pid: int
    parent: int
    start_s: float  # on the ledger's clock
    cpu_s: float  # its own CPU time plus that of the children it has reaped


class TreeLedger:
    """Sans-IO: the CPU seconds of a process tree, booked when spent (see the module doc).

    `update(now_s, members)` takes a snapshot of the tree's live members (the root included) and
    returns the cumulative CPU seconds booked up to `now_s`; the members of the first snapshot
    are the starting point (their time so far is not booked)."""

    def __init__(self, now_s: float, members: Iterable[TreeMember]) -> None:
        self._members = {(m.pid, m.start_s): m for m in members}
        self._last_s = now_s
        self._booked = 0.0
        self._debt = 0.0  # a dip (a child reaped between two readings), repaid first
        self._orphaned = 0.0  # time of members that died outside the tree (reaped by init)
        self.late_s = 0.0  # found-late time that fell before the previous snapshot

    @property
    def booked_s(self) -> float:
        return self._booked

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(pid for pid, _start in self._members)

    @property
    def known(self) -> dict[int, float]:
        """The members of the last snapshot: pid -> start."""
        return dict(self._members.keys())

    def update(self, now_s: float, members: Iterable[TreeMember]) -> float:
        current = {(m.pid, m.start_s): m for m in members}
        previous_s, self._last_s = self._last_s, max(now_s, self._last_s)
        change = 0.0
        for key, member in current.items():
            before = self._members.get(key)
            if before is not None:
                change += member.cpu_s - before.cpu_s
                continue
            share = _share_after(member.start_s, previous_s, now_s)
            change += member.cpu_s * share
            self.late_s += member.cpu_s * (1.0 - share)
        live = {pid for pid, _start in current}
        for key, gone in self._members.items():
            if key in current:
                continue
            if gone.parent in live:
                change -= gone.cpu_s  # its time moves into its reaping parent's children_*
            else:
                self._orphaned += gone.cpu_s  # reaped outside the tree: keep its last reading
        self._members = current
        change -= self._debt
        self._debt = max(0.0, -change)
        self._booked += max(0.0, change)
        return self._booked


def _share_after(start_s: float, previous_s: float, now_s: float) -> float:
    """The share of a life [start_s, now_s] that falls after `previous_s`."""
    life = now_s - start_s
    if life <= 0 or start_s >= previous_s:
        return 1.0
    return max(0.0, min(1.0, (now_s - previous_s) / life))


class ProcessTreeCpu:
    """Cumulative CPU seconds of a process and all its descendants, booked when spent."""

    def __init__(self, pid: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self._clock = clock
        self._boot_s = _boot_offset_s(clock)
        root = self._read(pid)
        if root is None:
            raise ConfigError(f"--watch-pid {pid}: no such process")
        self._ledger = TreeLedger(clock(), self._snapshot())

    @property
    def late_s(self) -> float:
        """CPU time that was found too late to book when it was spent."""
        return self._ledger.late_s

    @property
    def members(self) -> tuple[int, ...]:
        """The pids of the tree's last snapshot."""
        return self._ledger.members

    def cpu_seconds(self) -> float:
        return self._ledger.update(self._clock(), self._snapshot(self._ledger.known))

    def _snapshot(self, known: dict[int, float] | None = None) -> list[TreeMember]:
        """The root's descendants, and the `known` members (pid -> start) reparented out of the
        tree since: a process once of the node stays so until it dies."""
        found: dict[int, TreeMember] = {}
        pending = [self.pid]
        while pending:
            pid = pending.pop()
            if pid in found:
                continue
            member = self._read(pid)
            if member is None:
                continue
            found[pid] = member
            pending.extend(_children(pid))
        for pid, start_s in (known or {}).items():
            if pid not in found:
                member = self._read(pid)
                if member is not None and member.start_s == start_s:  # not a reused pid
                    found[pid] = member
        return list(found.values())

    def _read(self, pid: int) -> TreeMember | None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()
        except OSError:
            return None
        ticks = [int(fields[i]) for i in (_UTIME, _STIME, _CUTIME, _CSTIME, _STARTTIME)]
        own = _process_cpu_s(pid)
        if own is None:
            own = (ticks[0] + ticks[1]) / _TICKS_PER_S
        children = (ticks[2] + ticks[3]) / _TICKS_PER_S
        start = ticks[4] / _TICKS_PER_S - self._boot_s
        return TreeMember(pid, int(fields[_PPID]), start, own + children)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(child) for child in f.read().split())
    return found


def _boot_offset_s(clock: Callable[[], float]) -> float:
    """Seconds since boot (the clock of /proc's start times) minus `clock()`, sampled once."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) - clock()


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no C library to ask: /proc's ticks do
    _libc = None


def _process_cpu_s(pid: int) -> float | None:
    """A process's CPU time (all its threads, dead ones included) to the nanosecond, from its
    CPU-time clock; None where the C library cannot tell (then /proc's 10 ms ticks serve)."""
    if _libc is None:
        return None
    clock = ctypes.c_int()
    if _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        return None
    spec = _Timespec()
    if _libc.clock_gettime(clock, ctypes.byref(spec)) != 0:
        return None
    return float(spec.tv_sec) + float(spec.tv_nsec) / _NSEC_PER_S


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
    an interval (a counter read a little after the interval's end) is carried into the next,
    so none is lost."""

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
