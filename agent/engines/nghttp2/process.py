"""Run one child process to its end and account for it alone: its CPU time and peak RSS from
wait4 (the kernel's figures for that child, not the agent's), its write counters from what
reaping it adds to this process's own /proc/self/io. Its output is read through pipes, or, for
a child whose output is read only later (`output`: the periodic client's, outside the measured
window), written by the kernel to a file while the agent waits on the child's pidfd, spending no
CPU of its own on it.

The kernel adds a reaped child's I/O counters (its own and its reaped children's) to its
parent's, so the difference of /proc/self/io across wait4 is the child's total. Reading the
child's /proc/PID/io instead fails for an ordinary user once it has exited: a process without
memory (a zombie) has its /proc files owned by root. Only write counters are kept: reading
/proc/self/io counts as this process's reads.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.engines.nghttp2.procfs import parse_io

WRITE_COUNTERS = ("wchar", "syscw", "write_bytes", "cancelled_write_bytes")
_OWN_IO = "/proc/self/io"


def _own_io() -> dict[str, int]:
    with open(_OWN_IO, encoding="ascii") as handle:
        return parse_io(handle.read())


@dataclass(frozen=True)
class ChildOutcome:
    exit_status: int  # negative: killed by that signal
    stdout: bytes
    stderr: bytes
    timed_out: bool
    cpu_user_s: float
    cpu_sys_s: float
    rss_peak_bytes: int
    io: dict[str, int] | None  # write counters at exit (WRITE_COUNTERS); None: io_unavailable
    t_mono_start_ns: int
    t_mono_end_ns: int
    t_wall_start_ns: int
    io_unavailable: str | None = None  # why io is None

    @property
    def wall_s(self) -> float:
        return (self.t_mono_end_ns - self.t_mono_start_ns) / 1e9


def _drain(process: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, bool]:
    """Read stdout and stderr to their ends; kill the child at the deadline."""
    assert process.stdout is not None and process.stderr is not None
    chunks: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream.fileno(), selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                process.kill()
            for key, _ in selector.select(timeout=max(left, 0.05) if not timed_out else 1.0):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    return (
        b"".join(chunks[process.stdout.fileno()]),
        b"".join(chunks[process.stderr.fileno()]),
        timed_out,
    )


def _wait_exit(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Block until the child exits (its pidfd readable), killing it after timeout_s; whether
    it was killed."""
    pidfd = os.pidfd_open(process.pid)
    try:
        if select.select([pidfd], [], [], timeout_s)[0]:
            return False
        os.kill(process.pid, signal.SIGKILL)
        select.select([pidfd], [], [])
        return True
    finally:
        os.close(pidfd)


def run_child(argv: Sequence[str], timeout_s: float, output: Path | None = None) -> ChildOutcome:
    """Run argv with stdin closed, stdout and stderr captured (or, with `output`, written to
    that file together, the outcome's stdout and stderr empty); kill it after timeout_s."""
    t_wall_start = time.time_ns()
    t_mono_start = time.monotonic_ns()
    if output is None:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    else:
        with output.open("wb") as sink:
            process = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT
            )
    io: dict[str, int] | None = None
    io_unavailable: str | None = None
    try:
        if output is None:
            stdout, stderr, timed_out = _drain(process, time.monotonic() + timeout_s)
        else:
            stdout, stderr, timed_out = b"", b"", _wait_exit(process, timeout_s)
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        t_mono_end = time.monotonic_ns()
        before: dict[str, int] | None = None
        try:
            before = _own_io()
        except OSError as exc:  # a kernel without I/O accounting has no such file
            io_unavailable = f"{_OWN_IO}: {exc.strerror}"
        # Nothing else of this process writes between the two reads: the fetch loop waits here.
        _, status, usage = os.wait4(process.pid, 0)
        if before is not None:
            after = _own_io()
            io = {name: after[name] - before[name] for name in WRITE_COUNTERS if name in after}
    finally:
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return ChildOutcome(
        exit_status=process.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        cpu_user_s=usage.ru_utime,
        cpu_sys_s=usage.ru_stime,
        rss_peak_bytes=usage.ru_maxrss * 1024,
        io=io,
        t_mono_start_ns=t_mono_start,
        t_mono_end_ns=t_mono_end,
        t_wall_start_ns=t_wall_start,
        io_unavailable=io_unavailable,
    )
