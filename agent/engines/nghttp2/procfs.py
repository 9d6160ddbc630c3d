"""Another process's accounting in /proc, as the nghttpd supervisor reads it. Parsers are pure;
`ProcessProbe` is the thin reader.

- CPU time: /proc/PID/task/*/schedstat, the scheduler's nanosecond runtime per thread; where the
  kernel lacks it, utime + stime from /proc/PID/stat in clock ticks (usually 10 ms).
- The user/sys split: utime and stime (clock ticks) from /proc/PID/stat.
- Peak RSS: VmHWM in /proc/PID/status, reset by writing "5" to /proc/PID/clear_refs.
- Bytes written: wchar in /proc/PID/io (every write(2) of the process, sockets included).
- Listening sockets: the inodes of /proc/PID/fd/* matched with /proc/net/tcp and tcp6.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_LISTEN = "0A"
UDP_BOUND = "07"  # TCP_CLOSE: how /proc/net/udp shows a bound, unconnected socket
_RESET_PEAK_RSS = b"5"


def parse_schedstat(text: str) -> int:
    """/proc/PID/schedstat: `runtime_ns wait_ns timeslices` -> runtime in ns."""
    return int(text.split(maxsplit=1)[0])


def parse_stat_ticks(text: str) -> tuple[int, int]:
    """/proc/PID/stat -> (utime, stime) in clock ticks (fields 14 and 15 of proc(5))."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]), int(fields[12])


def parse_hwm_bytes(text: str) -> int | None:
    """/proc/PID/status -> VmHWM in bytes; None for a process without memory (a zombie)."""
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def parse_io(text: str) -> dict[str, int]:
    """/proc/PID/io -> {"rchar": n, "wchar": n, ...}."""
    counters = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            counters[name.strip()] = int(value)
    return counters


def listening_ports(table: str, inodes: set[int], state: str = _LISTEN) -> dict[int, int]:
    """/proc/net/tcp or tcp6 -> {inode: port} for the listening sockets among `inodes`; with
    `state` UDP_BOUND, /proc/net/udp or udp6's bound (unconnected) sockets."""
    ports = {}
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == state and int(fields[9]) in inodes:
            ports[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


def socket_inode(link: str) -> int | None:
    """A /proc/PID/fd link target `socket:[123]` -> 123."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[8:-1])
    return None


@dataclass(frozen=True)
class CpuSample:
    t_mono_ns: int
    t_wall_ns: int
    runtime_ns: int
    utime_ticks: int
    stime_ticks: int
    wchar: int | None


def _task_runtime_ns(task: Path) -> int:
    """One thread's CPU time; 0 for a thread that ended since its directory was listed."""
    try:
        return parse_schedstat((task / "schedstat").read_text())
    except (FileNotFoundError, ProcessLookupError):
        return 0


class ProcessProbe:
    """Reads one other process's accounting; every reader raises OSError once it is gone."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._proc = Path(f"/proc/{pid}")
        self.schedstat = self._has_schedstat()
        self._fds: list[int] = []

    def _has_schedstat(self) -> bool:
        try:
            parse_schedstat((self._proc / "schedstat").read_text())
        except (OSError, ValueError, IndexError):
            return False
        return True

    def runtime_ns(self) -> int:
        """CPU time so far, in ns (tick resolution without schedstat)."""
        if self.schedstat:
            return sum(map(_task_runtime_ns, (self._proc / "task").iterdir()))
        utime, stime = self.ticks()
        return (utime + stime) * 1_000_000_000 // CLOCK_TICKS

    def leader_runtime_reader(self) -> Callable[[], int]:
        """A cheap reader of the main thread's CPU time in ns, for polling: one pread(2) of a
        file kept open until `close()`."""
        name = "schedstat" if self.schedstat else "stat"
        fd = os.open(self._proc / name, os.O_RDONLY)

        def read() -> int:
            text = os.pread(fd, 1024, 0).decode("ascii")
            if self.schedstat:
                return parse_schedstat(text)
            utime, stime = parse_stat_ticks(text)
            return (utime + stime) * 1_000_000_000 // CLOCK_TICKS

        self._fds.append(fd)
        return read

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    def ticks(self) -> tuple[int, int]:
        return parse_stat_ticks((self._proc / "stat").read_text())

    def io(self) -> dict[str, int] | None:
        try:
            return parse_io((self._proc / "io").read_text())
        except PermissionError:
            return None

    def sample(self) -> CpuSample:
        t_mono, t_wall = time.monotonic_ns(), time.time_ns()
        utime, stime = self.ticks()
        io = self.io()
        return CpuSample(
            t_mono_ns=t_mono,
            t_wall_ns=t_wall,
            runtime_ns=self.runtime_ns(),
            utime_ticks=utime,
            stime_ticks=stime,
            wchar=None if io is None else io.get("wchar"),
        )

    def reset_peak_rss(self) -> bool:
        try:
            with (self._proc / "clear_refs").open("wb", buffering=0) as handle:
                handle.write(_RESET_PEAK_RSS)
        except OSError:
            return False
        return True

    def peak_rss_bytes(self) -> int | None:
        return parse_hwm_bytes((self._proc / "status").read_text())

    def listening_ports(self) -> list[int]:
        """The TCP ports this process listens on."""
        return self._ports(("tcp", "tcp6"), _LISTEN)

    def udp_ports(self) -> list[int]:
        """The UDP ports this process has bound (a QUIC server's)."""
        return self._ports(("udp", "udp6"), UDP_BOUND)

    def _ports(self, tables: tuple[str, str], state: str) -> list[int]:
        inodes = set()
        for fd in (self._proc / "fd").iterdir():
            try:
                inode = socket_inode(os.readlink(fd))
            except OSError:
                continue
            if inode is not None:
                inodes.add(inode)
        ports: dict[int, int] = {}
        for table in tables:
            try:
                text = (self._proc / "net" / table).read_text()
                ports.update(listening_ports(text, inodes, state))
            except OSError:
                continue
        return sorted(set(ports.values()))
